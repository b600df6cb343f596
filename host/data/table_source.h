// Internal to host/data: a source over arrays held in memory, one per feed, each
// [samples, sample dims...]. The csv and npy sources read their files into one of these.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/source.h"

namespace fleet::data {

// `tables[i]` belongs to `feeds[i]`; all have the same first dimension (> 0). `place` names
// where the tables were read from, for BatchOrigin: their rows are its records.
std::unique_ptr<DataSource> MakeTableSource(std::vector<FeedSpec> feeds,
                                            std::vector<exec::HostTensor> tables,
                                            std::string place);

}  // namespace fleet::data
