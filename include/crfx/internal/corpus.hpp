// crfx — dictionaries and the compiled corpus.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// String ↔ dense id map. Ids are assigned in order of first insertion; once frozen (after the
/// training data, like Wapiti's qrk_lock) unknown strings are not added. Each string is stored
/// once; the index is an open-addressing table of ids (linear probing, at most half full) with
/// the strings' hashes kept beside them, so a lookup hashes once and compares strings only on a
/// hash match.
class Dictionary {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  /// Id of `s`, adding it unless frozen (then kNone for an unknown string).
  std::uint32_t add(std::string_view s);
  /// Room for `n` strings without rehashing.
  void reserve(std::size_t n);
  /// Replaces the contents with `strings`, string i getting id i (a model's dictionaries are
  /// loaded this way: the table is built in one pass that requests slots ahead of their use).
  /// Returns the index of the first string equal to an earlier one — the dictionary is then
  /// left empty — or kNoDuplicate.
  static constexpr std::size_t kNoDuplicate = static_cast<std::size_t>(-1);
  std::size_t assign(std::vector<std::string> strings);
  /// Id of `s`, or kNone (a view of a tagging batch's text is looked up as it is).
  std::uint32_t find(std::string_view s) const;
  /// The same with `h` = std::hash<std::string_view>{}(s) (that of the string) already computed
  /// (a training compile's shards look strings up from several threads, find being const).
  std::uint32_t add(std::string_view s, std::size_t h);
  std::uint32_t find(std::string_view s, std::size_t h) const;
  /// ids[i] = find(s[i], h[i]) for i in [0, n), the table's slots and strings fetched a few
  /// look-ups ahead (a training compile's shards look up a block of attributes at a time: one
  /// at a time, each waits for three or four of memory's round trips).
  void find_many(const std::string_view* s, const std::size_t* h, std::size_t n, std::uint32_t* ids) const;
  /// Adds `other`'s strings in their id order, moved (`other` is left empty); returns other's id
  /// → this dictionary's id.
  std::vector<std::uint32_t> absorb(Dictionary&& other);
  const std::string& at(std::uint32_t id) const { return strings_[id]; }
  std::size_t size() const { return strings_.size(); }
  /// The heap bytes it holds: the strings (their vector's capacity and the characters beyond the
  /// small-string buffer), the hashes and the slot table (the training run's memory estimate).
  std::size_t bytes() const;
  /// The bytes that adding `more` strings may allocate at once: its arrays' and slot table's
  /// next growth (the new arrays while the old ones live), or 0 where they have the room.
  std::size_t growth_bytes(std::size_t more) const;
  const std::vector<std::string>& strings() const { return strings_; }
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  /// Keeps only ids with keep[id] true, renumbered in their old order; returns old → new
  /// (kNone for dropped ids).
  std::vector<std::uint32_t> compact(const std::vector<bool>& keep);

 private:
  /// The slot holding `s` (hash h), or the empty slot where it would go.
  std::size_t probe(std::string_view s, std::size_t h) const;
  void rehash(std::size_t slots);  // slots: a power of two > 2·size()
  void reserve_slots(std::size_t n);  // a table with room for n strings (rehashed if smaller)
  template <class String>
  std::uint32_t insert(String&& s, std::size_t h);  // add's body, a string copied or moved

  std::vector<std::string> strings_;
  std::vector<std::size_t> hashes_;   // [id] std::hash of strings_[id]
  std::vector<std::uint32_t> slots_;  // ids or kNone; size a power of two (or 0)
  bool frozen_ = false;
};

/// The weight vector in groups, the unit of the sparse gradients and of SAG's lazy updates
/// (backend.hpp): group a < A is state attribute a's weights, group A the transitions, group
/// A + 1 + e edge attribute e's block. A group's weights are slots of its row: a label y (state
/// groups) or a label pair y'·L + y (transitions and edge groups).
///   dense layout (offsets == nullptr; every attribute × label pair, as CRF++ and Wapiti):
///     [0, A·L)              state weights, w[a·L + y]
///     [A·L, A·L + L²)       transitions, w[A·L + y'·L + y]       (y' → y)
///     [A·L + L², … + E·L²)  edge weights, w[A·L + L² + (e·L + y')·L + y]
///     — weight k of group g has slot k − begin(g).
///   sparse layout (WeightLayout: CRFsuite's observed pairs): group g holds the weights
///     [offsets[g], offsets[g + 1]), weight k having slot slots[k] (ascending within a group);
///     a slot the row does not list has no weight (its score is 0).
/// One definition for both backends and the kernels (the pointers are the backend's copies).
struct WeightGroups {
  std::uint32_t A = 0;
  std::uint32_t E = 0;
  std::size_t L = 0;
  const std::size_t* offsets = nullptr;   // [count() + 1]; null: dense
  const std::uint32_t* slots = nullptr;   // [offsets[count()]]

  CRFX_HOST_DEVICE bool dense() const { return offsets == nullptr; }
  CRFX_HOST_DEVICE std::size_t count() const { return std::size_t(A) + 1 + E; }
  CRFX_HOST_DEVICE std::uint32_t transitions() const { return A; }
  CRFX_HOST_DEVICE std::uint32_t edge(std::uint32_t e) const { return A + 1 + e; }
  /// First weight of group `gid`, and its size.
  CRFX_HOST_DEVICE std::size_t begin(std::uint32_t gid) const {
    if (offsets) return offsets[gid];
    if (gid < A) return std::size_t(gid) * L;
    if (gid == A) return std::size_t(A) * L;
    return std::size_t(A) * L + (std::size_t(gid) - A) * L * L;  // transitions, then edge blocks
  }
  CRFX_HOST_DEVICE std::size_t size(std::uint32_t gid) const {
    if (offsets) return offsets[gid + 1] - offsets[gid];
    return gid < A ? L : L * L;
  }
  /// The slot of weight k of group gid.
  CRFX_HOST_DEVICE std::uint32_t slot(std::size_t k, std::uint32_t gid) const {
    return slots ? slots[k] : std::uint32_t(k - begin(gid));
  }
  /// The weight of group gid at `slot`, or kNoWeight when the row does not list it.
  static constexpr std::size_t kNoWeight = ~std::size_t(0);
  CRFX_HOST_DEVICE std::size_t find(std::uint32_t gid, std::uint32_t slot) const {
    std::size_t lo = begin(gid), hi = lo + size(gid);
    if (!slots) return lo + slot;
    while (lo < hi) {  // lower bound of slot in the ascending row
      const std::size_t mid = lo + (hi - lo) / 2;
      if (slots[mid] < slot) lo = mid + 1; else hi = mid;
    }
    return lo < begin(gid) + size(gid) && slots[lo] == slot ? lo : kNoWeight;
  }
};

/// f(weight index k, slot j) for each weight of group `gid`, in order; a dense row is the
/// contiguous loop (k = begin + j) the compiler vectorises.
template <class F>
inline void for_each_weight(const WeightGroups& wg, std::uint32_t gid, F&& f) {
  const std::size_t b = wg.begin(gid), n = wg.size(gid);
  if (wg.dense()) {
    for (std::size_t j = 0; j < n; ++j) f(b + j, j);
  } else {
    for (std::size_t k = b; k < b + n; ++k) f(k, std::size_t(wg.slots[k]));
  }
}

/// A sparse layout's rows (WeightGroups): per group the range of its weights and their slots.
struct WeightLayout {
  std::vector<std::size_t> offsets;   // [A + 1 + E + 1]
  std::vector<std::uint32_t> slots;   // [weights]
};

/// Sizes of the model: they fix the layout of the flat weight vector (WeightGroups).
/// The transition group always exists; when `transitions` is false it is held at zero (dense) or
/// empty (sparse).
struct Dims {
  std::uint32_t L = 0;  // labels
  std::uint32_t A = 0;  // state attributes
  std::uint32_t E = 0;  // edge attributes
  bool transitions = true;
  std::shared_ptr<const WeightLayout> layout;  // null: dense (every attribute × label pair)

  bool dense() const { return !layout; }
  std::size_t state_offset() const { return 0; }
  std::size_t transition_offset() const { return groups().begin(A); }
  std::size_t edge_offset() const { return groups().begin(A + 1); }
  std::size_t num_weights() const {
    return layout ? layout->offsets.back() : edge_offset() + std::size_t(E) * L * L;
  }
  WeightGroups groups() const {
    WeightGroups g{A, E, L};
    if (layout) {
      g.offsets = layout->offsets.data();
      g.slots = layout->slots.data();
    }
    return g;
  }
  /// Throws crfx::Error unless the layout has A + 1 + E rows of ascending slots below L (state
  /// rows) or L² (the others), and an empty transition row when `transitions` is false.
  void check_layout() const;
};

/// A compiled data set: sentences of tokens, each token a sparse attribute vector (CSR), plus
/// the gold label per token when known. Static once built; shuffling is by permutation of
/// sentence ids, never by copying.
struct Corpus {
  static constexpr std::uint32_t kNoLabel = 0xffffffffu;

  std::vector<std::size_t> sentence_offsets{0};  // [S+1] token range of sentence s
  std::vector<std::size_t> state_offsets{0};     // [N+1] item range of token t
  std::vector<std::uint32_t> state_ids;          // [items] state attribute ids
  std::vector<double> state_values;              // [items] their values; empty: all 1
  std::vector<std::size_t> edge_offsets{0};      // [N+1] edge items of token t (t ≥ 1 in sentence)
  std::vector<std::uint32_t> edge_ids;           // [edge items]
  std::vector<double> edge_values;               // [edge items]; empty: all 1
  std::vector<std::uint32_t> labels;             // [N] gold label ids, kNoLabel when unknown
  std::vector<std::size_t> source_lines;         // [S] first source line of each sentence

  /// Item k's value. CoNLL data with templates gives binary attributes: their values are left
  /// out (empty arrays), which saves 8 of every 12 bytes an item takes.
  double state_value(std::size_t k) const { return state_values.empty() ? 1.0 : state_values[k]; }
  double edge_value(std::size_t k) const { return edge_values.empty() ? 1.0 : edge_values[k]; }
  /// Throws crfx::Error unless each values array is empty or has one value per item.
  void check_values() const;

  std::size_t num_sentences() const { return sentence_offsets.size() - 1; }
  std::size_t num_tokens() const { return state_offsets.size() - 1; }
  std::size_t length(std::size_t s) const { return sentence_offsets[s + 1] - sentence_offsets[s]; }
  std::size_t max_length() const;
  /// True when every token has a gold label.
  bool labeled() const;
};

/// The observed-pair layout of a training corpus (CRFsuite's default feature set): a state
/// weight for each (attribute, gold label) pair, a transition for each gold label bigram (when
/// `dims.transitions`), an edge weight for each (edge attribute, gold label bigram) — the pairs
/// that occur in `c`, whose labels must all be known. `all_states` gives every state row all L
/// labels (CRFsuite's feature.possible_states = 1), `all_transitions` the transition and edge
/// rows all L² bigrams (feature.possible_transitions = 1). Made on up to `threads` threads (0: every
/// core); the same layout whatever their number.
WeightLayout observed_layout(const Corpus& c, const Dims& dims, bool all_states = false,
                             bool all_transitions = false, unsigned threads = 1);

/// A corpus's items grouped by id (its CSR transposed): the items of id a are off[a] … off[a + 1],
/// in token order, with their tokens and values (none where the items have no values).
struct ItemTranspose {
  std::vector<std::size_t> off;    // [n + 1]
  std::vector<std::uint32_t> tok;  // [items kept]
  std::vector<double> val;         // [items kept] or empty
};
/// The transpose of the items `ids` of tokens [0, N) (token t's are tok_off[t] … tok_off[t + 1]),
/// ids below n, leaving out the tokens t with skip[t] != 0 (skip: null or N flags). A counting
/// sort on up to `threads` threads (0: all cores), each a range of the tokens: the same arrays
/// whatever the count.
ItemTranspose transpose_items(std::size_t n, const std::vector<std::size_t>& tok_off,
                              const std::vector<std::uint32_t>& ids, const std::vector<double>& vals,
                              const std::vector<std::uint8_t>* skip, unsigned threads);

}  // namespace crfx
