"""References for the metric ops (see run_reference.py for the calling convention).

The AUC comes from scikit-learn's roc_auc_score (Debian's python3-sklearn), an implementation
independent of the op's bucket histograms. Called with a run of batches (Predict and Label hold
one array per batch, in order), it returns what the auc op must report after each batch:

- AUC: roc_auc_score over the batches the op's statistics cover (every batch so far when
  slide_steps is 0, else the last slide_steps batches), scored by bucket index
  floor(p * num_thresholds), p being the last column of Predict and the product taken in
  Predict's dtype. Ties within a bucket count half, as they do in the trapezoids of the op, so
  the op must match this to rounding. 0 where the covered rows hold one class only (the op's
  value; roc_auc_score refuses such data).
- AUCRaw: the same over the raw probabilities, and Bound: how far bucketing may move the AUC
  away from it, sum_b pos_b * neg_b / (2 * P * N) (the pairs a bucket turns into half-ties).
"""
import numpy as np


def _window_auc(labels, scores):
    # Imported here: every ref_*.py is loaded for any reference, and only this one needs sklearn.
    from sklearn.metrics import roc_auc_score

    if labels.min() == labels.max():
        return 0.0
    return float(roc_auc_score(labels, scores))


def auc_over_batches(inputs, attrs):
    thresholds = int(attrs["num_thresholds"])
    steps = int(attrs["slide_steps"])
    predicts = inputs["Predict"]
    labels = [l.reshape(-1).astype(np.int64) for l in inputs["Label"]]
    probs = [p[:, -1] for p in predicts]
    buckets = [np.floor(p * p.dtype.type(thresholds)).astype(np.int64) for p in probs]
    exact, raw, bound = [], [], []
    for k in range(len(predicts)):
        first = 0 if steps == 0 else max(0, k + 1 - steps)
        lab = np.concatenate(labels[first:k + 1])
        if lab.size == 0:
            exact.append(0.0)
            raw.append(0.0)
            bound.append(0.0)
            continue
        bkt = np.concatenate(buckets[first:k + 1])
        prob = np.concatenate(probs[first:k + 1]).astype(np.float64)
        exact.append(_window_auc(lab, bkt))
        raw.append(_window_auc(lab, prob))
        pos = np.bincount(bkt[lab == 1], minlength=thresholds + 1).astype(np.float64)
        neg = np.bincount(bkt[lab == 0], minlength=thresholds + 1).astype(np.float64)
        pairs = pos.sum() * neg.sum()
        bound.append(float((pos * neg).sum() / (2.0 * pairs)) if pairs > 0 else 0.0)
    return {"AUC": np.array(exact), "AUCRaw": np.array(raw), "Bound": np.array(bound)}


REFERENCES = {
    "auc_over_batches": auc_over_batches,
}
