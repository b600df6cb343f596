"""Runs one NumPy reference for the conformance harness.

Usage: run_reference.py DIR. DIR/manifest.json names the function, the op's attributes and
its input files (slot -> list of .npy files). The function comes from the REFERENCES dict of
a ref_*.py module beside this file; it takes (inputs, attrs), where inputs maps each slot to
a list of arrays, and returns a dict mapping output slots to an array or a list of arrays.
Outputs are written as DIR/out_<slot>_<i>.npy and listed in DIR/outputs.json.
"""
import glob
import importlib.util
import json
import os
import sys

import numpy as np


def load_references():
    here = os.path.dirname(os.path.abspath(__file__))
    table = {}
    for path in sorted(glob.glob(os.path.join(here, "ref_*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for key, fn in getattr(module, "REFERENCES", {}).items():
            if key in table:
                raise SystemExit(f"reference '{key}' is defined twice ({name})")
            table[key] = fn
    return table


def main():
    out_dir = sys.argv[1]
    with open(os.path.join(out_dir, "manifest.json")) as f:
        manifest = json.load(f)
    table = load_references()
    name = manifest["function"]
    if name not in table:
        raise SystemExit(f"no reference named '{name}'")
    inputs = {slot: [np.load(os.path.join(out_dir, f)) for f in files]
              for slot, files in manifest["inputs"].items()}
    result = table[name](inputs, manifest["attrs"])
    listing = {}
    for slot, value in result.items():
        arrays = value if isinstance(value, (list, tuple)) else [value]
        files = []
        for i, a in enumerate(arrays):
            fname = f"out_{slot}_{i}.npy"
            np.save(os.path.join(out_dir, fname), np.ascontiguousarray(a))
            files.append(fname)
        listing[slot] = files
    with open(os.path.join(out_dir, "outputs.json"), "w") as f:
        json.dump(listing, f)


if __name__ == "__main__":
    main()
