// crfx — the checks that data is what a model reads (host/features/input_checks.cpp): a feature
// column holding values the model never saw there, CoNLL columns read as CRFsuite attributes.
#pragma once

#include <cstddef>

#include "crfx/internal/features.hpp"

#include <string>

namespace crfx::features_detail {

/// "column" or "columns".
inline std::string columns_word(std::size_t n) { return n == 1 ? "column" : "columns"; }

/// Refuses (InputError naming the column) CoNLL data whose feature column holds values the model
/// never saw there: the rule at the top of input_checks.cpp. F: the model's feature columns.
void check_feature_columns(const FeatureSpace& fs, const TextData& data, std::size_t F);
/// Refuses CRFsuite data that looks like CoNLL columns (TextData::conll_shape) where also at
/// least half of the attribute occurrences (`unknown` of `total`) are unknown to the model.
void check_conll_shape(const TextData& data, std::size_t unknown, std::size_t total);
/// Refuses training data read as CRFsuite lines that looks like CoNLL columns (`shape` found).
[[noreturn]] void refuse_conll_shape(const ConllShape& shape);

}  // namespace crfx::features_detail
