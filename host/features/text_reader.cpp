// crfx — the feature space's small parts (its Dims, the model type's names, the layout choice) and
// TextReader, the batches of sentences of a training or tagging file (CoNLL columns or CRFsuite
// attribute lines) that compile.cpp's compilers take. Declared in crfx/internal/features.hpp.
#include <cstdint>
#include <memory>
#include <string>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/io.hpp"

namespace crfx {

Dims FeatureSpace::dims() const {
  Dims d;
  d.L = static_cast<std::uint32_t>(labels.size());
  d.A = static_cast<std::uint32_t>(state_attrs.size());
  d.E = static_cast<std::uint32_t>(edge_attrs.size());
  d.transitions = type == ModelType::maxent    ? false
                  : format == InputFormat::crfsuite ? true
                                                    : templ.has_transitions();
  d.layout = layout;
  return d;
}

std::size_t FeatureSpace::dictionary_bytes() const {
  return labels.bytes() + state_attrs.bytes() + edge_attrs.bytes();
}

const char* name_of(ModelType type) { return type == ModelType::maxent ? "maxent" : "crf"; }

ModelType parse_model_type(const std::string& name) {
  if (name == "crf") return ModelType::crf;
  if (name == "maxent") return ModelType::maxent;
  throw Error("unknown model type '" + name + "' (known: crf, maxent)");
}

void choose_layout(FeatureSpace& fs, const Corpus& training, FeatureSet set, unsigned threads) {
  fs.layout = nullptr;
  if (!set.all())
    fs.layout = std::make_shared<const WeightLayout>(
        observed_layout(training, fs.dims(), set.all_states, set.all_transitions, threads));
}

std::size_t TextData::num_sentences() const {
  return format == InputFormat::conll ? conll.size() : crfsuite.size() + crfsuite_lines.size();
}

TextReader::TextReader(const FeatureSpace& fs, const std::string& path)
    : TextReader(fs.format, fs.feature_columns, path) {}

TextReader::TextReader(InputFormat format, const std::string& path) : TextReader(format, 0, path) {}

TextReader::TextReader(InputFormat format, std::size_t feature_columns, const std::string& path)
    : format_(format), feature_columns_(feature_columns), path_(path) {
  if (format_ == InputFormat::conll)
    conll_ = std::make_unique<ConllReader>(path, feature_columns_, feature_columns_ > 0);
  else
    crfsuite_ = std::make_unique<CrfsuiteReader>(path);
}

bool TextReader::next(TextData& batch, std::size_t max_tokens) {
  batch = TextData();
  batch.format = format_;
  batch.path = path_;
  batch.feature_columns = format_ == InputFormat::conll ? feature_columns_ : 0;
  return append(batch, max_tokens) > 0;
}

std::size_t TextReader::append(TextData& batch, std::size_t max_tokens, std::uint64_t max_bytes) {
  if (batch.format != format_) throw Error("internal: a batch of another format");
  std::size_t tokens = 0;
  const std::uint64_t bytes_end = max_bytes > ~std::uint64_t(0) - bytes_read() ? ~std::uint64_t(0)
                                                                               : bytes_read() + max_bytes;
  auto room = [&] { return tokens < max_tokens && (tokens == 0 || bytes_read() < bytes_end); };
  if (conll_) {
    ConllSentence s;
    while (room()) {
      if (!conll_->next(s)) {
        exhausted_ = true;
        break;
      }
      tokens += s.size();
      batch.conll.push_back(std::move(s));
    }
  } else if (lines_) {
    CrfsuiteLines& lines = batch.crfsuite_lines;
    while (room()) {
      if (!crfsuite_->next(lines)) {
        exhausted_ = true;
        break;
      }
      tokens += lines.tokens(lines.size() - 1);
    }
    batch.conll_shape = crfsuite_->conll_shape();
  } else {
    CrfsuiteSentence s;
    while (room()) {
      if (!crfsuite_->next(s)) {
        exhausted_ = true;
        break;
      }
      tokens += s.size();
      batch.crfsuite.push_back(std::move(s));
    }
    batch.conll_shape = crfsuite_->conll_shape();
  }
  return tokens;
}

std::uint64_t TextReader::bytes_read() const {
  return conll_ ? conll_->bytes_read() : crfsuite_->bytes_read();
}

TextData read_text(const FeatureSpace& fs, const std::string& path) {
  TextReader reader(fs, path);
  TextData d;
  reader.next(d, std::size_t(-1));  // everything (an empty file gives an empty TextData)
  return d;
}

}  // namespace crfx
