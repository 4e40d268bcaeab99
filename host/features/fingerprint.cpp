// crfx — fingerprints of a compiled corpus and of a feature space (features.hpp), for checkpoints.
#include "crfx/internal/features.hpp"
#include "util/fnv.hpp"

namespace crfx {

std::uint64_t fingerprint(const Corpus& c) {
  Fnv64 f;
  f.add(c.sentence_offsets);
  f.add(c.state_offsets);
  f.add(c.state_ids);
  f.add(c.state_values);
  f.add(c.edge_offsets);
  f.add(c.edge_ids);
  f.add(c.edge_values);
  f.add(c.labels);
  return f.h;
}

std::uint64_t fingerprint(const std::string& text) {
  Fnv64 f;
  f.add(text);
  return f.h;
}

std::uint64_t fingerprint(const FeatureSpace& fs) {
  Fnv64 f;
  const std::uint64_t format = std::uint64_t(fs.format), columns = fs.feature_columns;
  f.add(&format, sizeof format);
  if (fs.type != ModelType::crf) {  // (a CRF's fingerprint is what it was before model types)
    const std::uint64_t type = std::uint64_t(fs.type);
    f.add(&type, sizeof type);
  }
  f.add(&columns, sizeof columns);
  f.add(fs.templ.source());
  for (const Dictionary* d : {&fs.labels, &fs.state_attrs, &fs.edge_attrs}) {
    const std::uint64_t n = d->size();
    f.add(&n, sizeof n);
    for (const std::string& s : d->strings()) f.add(s);
  }
  const std::uint64_t dense = fs.layout ? 0 : 1;
  f.add(&dense, sizeof dense);
  if (fs.layout) {
    f.add(fs.layout->offsets);
    f.add(fs.layout->slots);
  }
  return f.h;
}

}  // namespace crfx
