// Comparing compiled corpora in the test suites.
#pragma once

#include <gtest/gtest.h>

#include "crfx/internal/corpus.hpp"

namespace crfx::test {

/// Every array of `a` equal to `b`'s: the sentences, their source lines, the labels, the state
/// and edge items with their values.
inline void expect_same_corpus(const Corpus& a, const Corpus& b) {
  EXPECT_EQ(a.sentence_offsets, b.sentence_offsets);
  EXPECT_EQ(a.source_lines, b.source_lines);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.state_offsets, b.state_offsets);
  EXPECT_EQ(a.state_ids, b.state_ids);
  EXPECT_EQ(a.state_values, b.state_values);
  EXPECT_EQ(a.edge_offsets, b.edge_offsets);
  EXPECT_EQ(a.edge_ids, b.edge_ids);
  EXPECT_EQ(a.edge_values, b.edge_values);
}

}  // namespace crfx::test
