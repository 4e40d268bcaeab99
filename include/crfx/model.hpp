// crfx — the model: feature space + weights, and its binary file.
//
// File layout (all integers little-endian, doubles as IEEE-754 bit patterns, so a save → load
// round trip is bit-exact):
//   magic "CRFXMODL", u32 version,
//   sections, each: 4-byte tag, u64 byte length, payload:
//     "HEAD" format, feature_columns, L, A, E, transitions flag
//     "TYPE" the model type (Maxent models only: a file without it is a CRF's)
//     "TMPL" template source text (conll only)
//     "LABL" label strings,  "ATTR" state attribute strings,  "EDGE" edge attribute strings
//     "WGHT" non-zero weights as (u64 index, f64 value), ascending index (version 1), or
//     "WDNS" every weight as f64 (version 2; written when smaller, i.e. more than half non-zero)
//   "CRC " u32 CRC-32 (zlib) of every byte before this section.
// Only attributes with a non-zero weight are stored; ids are renumbered in their old order.
//
// Entry points meant to stay stable (README, "As a library"): load_model,
//  save_model, Model.
#pragma once

#include <string>
#include <vector>

#include "crfx/internal/features.hpp"

namespace crfx {

struct Model {
  FeatureSpace features;
  std::vector<double> weights;  // layout: Dims (corpus.hpp)
};

/// Writes the model atomically (temporary file + rename), keeping only attributes with a
/// non-zero weight.
void save_model(const Model& model, const std::string& path);
/// Loads and validates a model; malformed files throw InputError(path, 0, …) naming the problem.
Model load_model(const std::string& path);
/// Readable listing: header, labels, transitions, then every non-zero state / edge weight.
std::string dump_model(const Model& model);
/// Serialised bytes of a model as save_model writes them (after dropping zero attributes).
std::string serialize_model(const Model& model);

}  // namespace crfx
