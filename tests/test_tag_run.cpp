// Tagging many inputs in one run (include/crfx/internal/tag_run.hpp): outputs byte for byte those of
// tagging each input alone whatever the workers and batch size, stats and progress, input errors
// (stop or keep going), output errors, output_paths; and what the run stands on: list_inputs,
// AtomicFileGroup, and the merging of evaluations (a total over several files).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/eval.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/output.hpp"
#include "crfx/internal/tag_run.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::temp_dir;
using test::write_text;
using Strings = std::vector<std::string>;

std::string slurp(const std::string& path) { return test::read_text(path); }
bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

/// Every file below `dir`, by path relative to it, sorted.
Strings listing(const std::string& dir) {
  Strings out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (!e.is_directory()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

bool has_temporary(const std::string& dir) {
  const Strings files = listing(dir);
  return std::any_of(files.begin(), files.end(), [](const std::string& f) { return f.find(".tmp.") != std::string::npos; });
}

/// A model trained for a few iterations (as test_tagger.cpp trains its own).
std::string train(const std::string& data, const std::string& options) {
  const std::string m = test::temp_path("tag_run.model");
  std::string out;
  const int rc = test::run("'" + test::crfx_binary() + "' train '" + data_path(data) + "' " + options + " -m '" + m +
                               "' --max-iterations 30 --quiet",
                           &out);
  if (rc != 0) throw std::runtime_error("training failed: " + out);
  return m;
}

const std::string& conll_model() {
  static const std::string m = train("conll2000.train300.txt", "-t '" + data_path("chunking.template") + "'");
  return m;
}

Tagger cpu_tagger(const TagOptions& options, const std::string& model = conll_model()) {
  Model m = load_model(model);
  const Dims dims = m.features.dims();
  BackendOptions bo;
  bo.device = DeviceKind::cpu;
  return Tagger(std::move(m), make_backend(dims, bo, nullptr), options);
}

/// The sentences of a data file, each its lines and a blank line.
Strings sentences_of(const std::string& data) {
  Strings out;
  std::string block, line;
  LineReader r(data_path(data));
  while (r.next(line)) {
    if (!line.empty()) {
      block += line + "\n";
    } else if (!block.empty()) {
      out.push_back(block + "\n");
      block.clear();
    }
  }
  if (!block.empty()) out.push_back(block + "\n");
  return out;
}

/// A data file cut into inputs of 1, 2, 3, 1, 2, 3… sentences: the fourth empty, the second
/// without its last blank line, the third without its last newline either.
struct Split {
  std::vector<InputFile> inputs;
  std::vector<std::size_t> sentences, tokens;  // per input
  std::uint64_t bytes = 0;
  std::size_t all_sentences() const { return std::accumulate(sentences.begin(), sentences.end(), std::size_t(0)); }
  std::size_t all_tokens() const { return std::accumulate(tokens.begin(), tokens.end(), std::size_t(0)); }
};

Split split(const std::string& data = "conll2000.test100.txt") {
  const Strings all = sentences_of(data);
  const std::string dir = temp_dir();
  Strings paths;
  Split s;
  for (std::size_t next = 0, k = 0; next < all.size(); ++k) {
    std::string text;
    s.sentences.push_back(0);
    s.tokens.push_back(0);
    for (std::size_t n = k == 3 ? 0 : 1 + k % 3; n > 0 && next < all.size(); --n, ++s.sentences.back()) {
      s.tokens.back() += std::size_t(std::count(all[next].begin(), all[next].end(), '\n')) - 1;
      text += all[next++];
    }
    if (k == 1 || k == 2) text.resize(text.size() - k);
    char name[32];
    std::snprintf(name, sizeof name, "/f%02zu.txt", k);
    write_text(dir + name, text);
    paths.push_back(dir + name);
    s.bytes += text.size();
  }
  s.inputs = list_inputs(paths, false);
  return s;
}

/// What tagging each input alone prints (TextReader, Tagger::tag, Tagger::format).
Strings tag_each_alone(Tagger& tagger, const std::vector<InputFile>& inputs) {
  Strings out;
  for (const InputFile& f : inputs) {
    TextReader reader(tagger.features(), f.path);
    TextData batch;
    Tagged tagged;
    out.emplace_back();
    while (reader.next(batch, std::size_t(1) << 18)) {
      tagger.tag(batch, tagged);
      tagger.format(batch, tagged, out.back());
    }
  }
  return out;
}

/// The message of the InputError that reading `path` alone throws.
std::string read_error(const Tagger& tagger, const std::string& path) {
  try {
    TextReader reader(tagger.features(), path);
    TextData batch;
    while (reader.next(batch, 1000)) {
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

/// Workers 1, 2, 4 × batches of 1, 7 and 262144 tokens.
std::vector<TagRunOptions> configurations(bool keep_going = false) {
  std::vector<TagRunOptions> out;
  for (unsigned workers : {1u, 2u, 4u})
    for (std::size_t batch_tokens : {std::size_t(1), std::size_t(7), std::size_t(262144)}) {
      out.emplace_back();
      out.back().workers = workers;
      out.back().batch_tokens = batch_tokens;
      out.back().keep_going = keep_going;
    }
  return out;
}

std::string describe(const TagRunOptions& o) {
  return "workers " + std::to_string(o.workers) + ", batch_tokens " + std::to_string(o.batch_tokens);
}

/// paths[i] holds expected[i], except where absent(i): no such file.
void expect_outputs(const Strings& paths, const Strings& expected, const std::function<bool(std::size_t)>& absent) {
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (absent(i)) {
      EXPECT_FALSE(exists(paths[i])) << paths[i];
    } else if (exists(paths[i])) {
      EXPECT_EQ(slurp(paths[i]), expected[i]) << paths[i];
    } else {
      ADD_FAILURE() << paths[i] << " missing";
    }
  }
}

// ---- TagRun --------------------------------------------------------------------------------

void expect_as_alone(const Split& s, const TagOptions& options, const std::string& model) {
  Tagger tagger = cpu_tagger(options, model);
  const Strings expected = tag_each_alone(tagger, s.inputs);
  ASSERT_EQ(expected[3], "");
  ASSERT_FALSE(expected[0].empty());
  const std::string concatenated = std::accumulate(expected.begin(), expected.end(), std::string());
  for (const TagRunOptions& ro : configurations()) {
    SCOPED_TRACE(describe(ro) + ", nbest " + std::to_string(options.nbest) + ", marginals " +
                 std::to_string(options.marginals));
    const std::string dir = temp_dir() + "/out";
    const Strings paths = output_paths(s.inputs, dir, ".tag");
    {
      DirectoryOutput out(paths);
      const TagRunStats stats = tag_inputs(tagger, s.inputs, out, ro);
      EXPECT_EQ(stats.inputs_done, s.inputs.size());
      EXPECT_TRUE(stats.failures.empty());
    }
    expect_outputs(paths, expected, [](std::size_t) { return false; });
    EXPECT_EQ(listing(dir).size(), s.inputs.size());  // nothing else (no temporary)
    const std::string file = temp_dir() + "/all.tag";
    {
      ConcatenatedOutput out(file);
      tag_inputs(tagger, s.inputs, out, ro);
    }
    EXPECT_EQ(slurp(file), concatenated);
  }
}

TEST(TagRun, OutputsAreThoseOfTaggingEachInputAlone) {
  const Split s = split();
  ASSERT_GE(s.inputs.size(), 40u);
  TagOptions plain, nbest, marginals;
  nbest.nbest = 3;
  nbest.probability = true;
  marginals.marginals = true;
  for (const TagOptions& options : {plain, nbest, marginals}) expect_as_alone(s, options, conll_model());
}

TEST(TagRun, CrfsuiteInputsToo) {
  const std::string model = train("conll2000.train60.crfsuite.txt", "--format crfsuite");
  TagOptions nbest;
  nbest.nbest = 2;
  expect_as_alone(split("conll2000.test30.crfsuite.txt"), nbest, model);
}

TEST(TagRun, StatsAndProgress) {
  const Split s = split();
  Tagger tagger = cpu_tagger({});
  ASSERT_EQ(s.all_sentences(), 100u);
  for (unsigned workers : {1u, 3u}) {
    std::vector<TagProgress> calls;
    TagRunOptions ro;
    ro.workers = workers;
    ro.batch_tokens = 50;
    ro.progress = [&](const TagProgress& p) { calls.push_back(p); };
    DirectoryOutput out(output_paths(s.inputs, temp_dir(), ""));
    const TagRunStats stats = tag_inputs(tagger, s.inputs, out, ro);
    EXPECT_EQ(stats.inputs, s.inputs.size());
    EXPECT_EQ(stats.inputs_done, s.inputs.size());
    EXPECT_EQ(stats.sentences, s.all_sentences());
    EXPECT_EQ(stats.tokens, s.all_tokens());
    EXPECT_EQ(stats.bytes, s.bytes);
    EXPECT_EQ(stats.bytes_read, s.bytes);
    ASSERT_GT(calls.size(), 10u);  // batches of 50 tokens: a call after each
    for (std::size_t c = 0; c < calls.size(); ++c) {
      EXPECT_EQ(calls[c].inputs, s.inputs.size());
      EXPECT_EQ(calls[c].bytes, s.bytes);
      if (c == 0) continue;
      EXPECT_GE(calls[c].tokens, calls[c - 1].tokens) << c;
      EXPECT_GE(calls[c].sentences, calls[c - 1].sentences) << c;
      EXPECT_GE(calls[c].inputs_done, calls[c - 1].inputs_done) << c;
    }
    EXPECT_EQ(calls.back().tokens, s.all_tokens());
    EXPECT_EQ(calls.back().inputs_done, s.inputs.size());
    // Where the time went: every stage ran, none is negative, and the stages and waits of the
    // workers add up to no more than the workers' share of the run.
    const TagStageSeconds& t = stats.stages;
    for (double v : {t.read, t.compile, t.decode, t.format, t.write}) EXPECT_GT(v, 0);
    EXPECT_GE(t.wait, 0);
    EXPECT_LE(t.read + t.compile + t.decode + t.format + t.write + t.wait, workers * stats.seconds + 1e-3);
  }
}

TEST(TagRun, NoInputsAndOptionsOutOfRange) {
  Tagger tagger = cpu_tagger({});
  const std::string file = temp_dir() + "/none.tag";
  {
    ConcatenatedOutput out(file);
    const TagRunStats stats = tag_inputs(tagger, {}, out, {});
    EXPECT_EQ(stats.inputs + stats.sentences + stats.tokens + stats.bytes, 0u);
  }
  EXPECT_EQ(slurp(file), "");  // an empty output, in place
  const Split s = split();
  TagRunOptions ro;
  ro.batch_tokens = 0;
  DirectoryOutput out(output_paths(s.inputs, temp_dir(), ""));
  EXPECT_THROW(tag_inputs(tagger, s.inputs, out, ro), Error);
  ro.batch_tokens = 100;
  ro.workers = 0;  // as one
  EXPECT_EQ(tag_inputs(tagger, s.inputs, out, ro).inputs_done, s.inputs.size());
}

/// Input `bad` of `s` replaced by a sentence, another with a line of four columns (the model
/// has two feature columns and an optional label); that line's number.
std::size_t spoil(const Split& s, std::size_t bad) {
  const std::string first = sentences_of("conll2000.test100.txt")[0];
  write_text(s.inputs[bad].path, first + "Two CD B-NP\nbad NN B-NP extra\nend NN I-NP\n\n");
  return std::size_t(std::count(first.begin(), first.end(), '\n')) + 2;
}

TEST(TagRun, AnInputErrorStopsTheRunAfterTheInputsBeforeIt) {
  const Split s = split();
  Tagger tagger = cpu_tagger({});
  const Strings expected = tag_each_alone(tagger, s.inputs);
  const std::size_t bad = 5, line = spoil(s, bad);
  const std::string message = read_error(tagger, s.inputs[bad].path);
  ASSERT_EQ(message.rfind(s.inputs[bad].path + ":" + std::to_string(line) + ": ", 0), 0u) << message;
  for (const TagRunOptions& ro : configurations()) {
    SCOPED_TRACE(describe(ro));
    const std::string dir = temp_dir();
    const Strings paths = output_paths(s.inputs, dir, ".out");
    try {
      DirectoryOutput out(paths);
      tag_inputs(tagger, s.inputs, out, ro);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), message);
      EXPECT_EQ(e.file(), s.inputs[bad].path);
      EXPECT_EQ(e.line(), line);
    }
    expect_outputs(paths, expected, [&](std::size_t i) { return i >= bad; });
    EXPECT_FALSE(has_temporary(dir));
    // In one stream: nothing written, an existing file left as it was.
    const std::string file = dir + "/all.out";
    write_text(file, "old");
    {
      ConcatenatedOutput out(file);
      EXPECT_THROW(tag_inputs(tagger, s.inputs, out, ro), InputError);
    }
    EXPECT_EQ(slurp(file), "old");
    EXPECT_FALSE(has_temporary(dir));
  }
}

/// keep_going runs, in every configuration, where input `bad` fails with `message`: that input
/// alone is dropped, reported and not counted.
void expect_kept_going(Tagger& tagger, const Split& s, const Strings& expected, std::size_t bad,
                       const std::string& message) {
  for (const TagRunOptions& ro : configurations(true)) {
    SCOPED_TRACE(describe(ro));
    const std::string dir = temp_dir();
    const Strings paths = output_paths(s.inputs, dir, "");
    TagRunStats stats;
    {
      DirectoryOutput out(paths);
      ASSERT_NO_THROW(stats = tag_inputs(tagger, s.inputs, out, ro));
    }
    ASSERT_EQ(stats.failures.size(), 1u);
    EXPECT_EQ(stats.failures[0].input, bad);
    EXPECT_EQ(stats.failures[0].message, message);
    EXPECT_EQ(stats.inputs_done, s.inputs.size());
    EXPECT_EQ(stats.sentences, s.all_sentences() - s.sentences[bad]);  // the failed input's not counted
    EXPECT_EQ(stats.tokens, s.all_tokens() - s.tokens[bad]);
    expect_outputs(paths, expected, [&](std::size_t i) { return i == bad; });
    EXPECT_EQ(listing(dir).size(), paths.size() - 1);  // no temporary
  }
}

TEST(TagRun, KeepGoingDropsTheFailedInputsOnly) {
  const Split s = split();
  Tagger tagger = cpu_tagger({});
  const Strings expected = tag_each_alone(tagger, s.inputs);
  spoil(s, 5);
  expect_kept_going(tagger, s, expected, 5, read_error(tagger, s.inputs[5].path));
  // One stream cannot take a failed input's output back: refused before anything is written.
  const std::string dir = temp_dir();
  {
    ConcatenatedOutput out(dir + "/all.out");
    try {
      tag_inputs(tagger, s.inputs, out, configurations(true)[0]);
      ADD_FAILURE() << "keep_going into one stream was not refused";
    } catch (const InputError& e) {
      ADD_FAILURE() << "an input's error, not the refusal: " << e.what();
    } catch (const Error&) {
    }
  }
  EXPECT_TRUE(listing(dir).empty());
}

TEST(TagRun, KeepGoingPastAMissingInput) {
  const Split s = split();
  Tagger tagger = cpu_tagger({});
  const Strings expected = tag_each_alone(tagger, s.inputs);
  fs::remove(s.inputs[7].path);  // listed, then removed before the run
  const std::string message = read_error(tagger, s.inputs[7].path);
  ASSERT_EQ(message.rfind(s.inputs[7].path + ": ", 0), 0u) << message;
  expect_kept_going(tagger, s, expected, 7, message);
}

// An error that is no input's (an output that cannot be written) stops the run at once, on any
// number of workers; no temporary stays and no output is partial.
TEST(TagRun, AnOutputErrorStopsTheRun) {
  const Split s = split();
  Tagger tagger = cpu_tagger({});
  const Strings expected = tag_each_alone(tagger, s.inputs);
  std::vector<TagRunOptions> all = configurations(false), keep_going = configurations(true);
  all.insert(all.end(), keep_going.begin(), keep_going.end());
  for (const TagRunOptions& ro : all) {
    SCOPED_TRACE(describe(ro) + (ro.keep_going ? ", keep_going" : ""));
    const std::string dir = temp_dir();
    const Strings paths = output_paths(s.inputs, dir, "");
    fs::create_directories(paths[10]);
    try {
      DirectoryOutput out(paths);
      tag_inputs(tagger, s.inputs, out, ro);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      ADD_FAILURE() << "not an input's error: " << e.what();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(paths[10]), std::string::npos) << e.what();
    }
    EXPECT_FALSE(has_temporary(dir));
    EXPECT_TRUE(fs::is_directory(paths[10]));
    fs::remove(paths[10]);
    // Outputs before it may stay (if synced) but whole; none after it.
    expect_outputs(paths, expected, [&](std::size_t i) { return i >= 10 || !exists(paths[i]); });
  }
}

TEST(TagRun, NestedInputsGiveNestedOutputs) {
  const std::string in = temp_dir();
  const Strings sentences = sentences_of("conll2000.test100.txt");
  fs::create_directories(in + "/b/c");
  write_text(in + "/a.txt", sentences[0]);
  test::write_gz(in + "/b/c/d.txt.gz", sentences[1] + sentences[2]);
  const std::vector<InputFile> inputs = list_inputs({in}, true);
  Tagger tagger = cpu_tagger({});
  const std::string out_dir = temp_dir() + "/x/y";  // made as needed
  {
    DirectoryOutput out(output_paths(inputs, out_dir, ".tag"));
    tag_inputs(tagger, inputs, out, {});
  }
  EXPECT_EQ(listing(out_dir), (Strings{"a.txt.tag", "b/c/d.txt.tag"}));
  EXPECT_EQ(Strings({slurp(out_dir + "/a.txt.tag"), slurp(out_dir + "/b/c/d.txt.tag")}), tag_each_alone(tagger, inputs));
}

TEST(TagRun, OutputPaths) {
  auto input = [](const std::string& path, const std::string& name) {
    InputFile f;
    f.path = path;
    f.name = name;
    return f;
  };
  EXPECT_EQ(output_paths({input("in/a.txt.gz", "a.txt.gz"), input("in/sub/b.conll", "sub/b.conll"),
                          input("c.gz", "c.gz"), input("d.gzip", "d.gzip")},
                         "out", ".tag"),
            (Strings{"out/a.txt.tag", "out/sub/b.conll.tag", "out/c.tag", "out/d.gzip.tag"}));
  EXPECT_EQ(output_paths({input("x/a.txt", "a.txt")}, "out/", ""), (Strings{"out/a.txt"}));
  auto collision = [&](const std::vector<InputFile>& inputs, const std::string& first, const std::string& second) {
    try {
      output_paths(inputs, "out", "");
      ADD_FAILURE() << "no error for " << first << " and " << second;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(first), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(second), std::string::npos) << e.what();
    }
  };
  collision({input("p/a.txt", "a.txt"), input("q/b.txt", "b.txt"), input("r/a.txt", "a.txt")}, "p/a.txt", "r/a.txt");
  collision({input("p/a.txt.gz", "a.txt.gz"), input("q/a.txt", "a.txt")}, "p/a.txt.gz", "q/a.txt");
  EXPECT_THROW(output_paths({input("p/a.txt", "a.txt"), input("-", "-")}, "out", ".tag"), Error);
}

// ---- list_inputs ---------------------------------------------------------------------------

/// Passes when f() throws InputError whose message contains `fragment`.
::testing::AssertionResult throws_input_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
  } catch (const InputError& e) {
    if (std::string(e.what()).find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << e.what() << "' lacks '" << fragment << "'";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "other exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception";
}

Strings names(const std::vector<InputFile>& inputs) {
  Strings out;
  for (const InputFile& f : inputs) out.push_back(f.name);
  return out;
}

TEST(InputList, FilesInArgumentOrder) {
  const std::string d = temp_dir();
  write_text(d + "/b.txt", "12345");
  write_text(d + "/a.txt", "1");
  ASSERT_EQ(::mkfifo((d + "/pipe").c_str(), 0600), 0);
  const std::vector<InputFile> in = list_inputs({d + "/b.txt", d + "/a.txt", "-", d + "/pipe"}, false);
  EXPECT_EQ(names(in), (Strings{"b.txt", "a.txt", "-", "pipe"}));
  EXPECT_EQ(in[0].path, d + "/b.txt");
  EXPECT_EQ(in[0].bytes, 5u);
  EXPECT_EQ(in[1].bytes, 1u);
  EXPECT_NE(in[0].inode, in[1].inode);
  EXPECT_EQ(in[2].path, "-");
  EXPECT_EQ(in[2].inode + in[2].bytes + in[3].bytes, 0u);  // streams: no size
  EXPECT_TRUE(throws_input_error([&] { list_inputs({"-", d + "/a.txt", "-"}, false); }, "-"));
  EXPECT_TRUE(throws_input_error([&] { list_inputs({d + "/a.txt", d + "/nope.txt"}, false); }, d + "/nope.txt"));
  EXPECT_TRUE(throws_input_error([&] { list_inputs({d}, false); }, "a directory"));
  EXPECT_TRUE(throws_input_error([&] { list_inputs({d}, false); }, d));
}

TEST(InputList, RecursiveDirectoriesSortedByRelativePath) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/a");
  fs::create_directories(d + "/c/e");
  fs::create_directories(d + "/empty");
  for (const char* f : {"b.txt", "a/z.txt", "a/y.txt", "a.txt", "c/e/x.gz", "c/d.txt"}) write_text(d + "/" + f, f);
  ASSERT_EQ(::symlink((d + "/b.txt").c_str(), (d + "/c/link.txt").c_str()), 0);  // to a file: followed
  const Strings expected{"a.txt", "a/y.txt", "a/z.txt", "b.txt", "c/d.txt", "c/e/x.gz", "c/link.txt"};
  for (const std::string& arg : {d, d + "/"}) {
    const std::vector<InputFile> in = list_inputs({arg}, true);
    EXPECT_EQ(names(in), expected) << arg;
    for (const InputFile& f : in) {
      EXPECT_EQ(slurp(f.path), f.name == "c/link.txt" ? "b.txt" : f.name);
      EXPECT_EQ(f.bytes, slurp(f.path).size());
    }
  }
  // Names are relative to the argument that named them; arguments keep their order.
  const std::vector<InputFile> mixed = list_inputs({d + "/b.txt", d + "/c", d + "/a.txt"}, true);
  EXPECT_EQ(names(mixed), (Strings{"b.txt", "d.txt", "e/x.gz", "link.txt", "a.txt"}));
  EXPECT_EQ(mixed[2].path, d + "/c/e/x.gz");
  EXPECT_TRUE(list_inputs({d + "/empty"}, true).empty());
  EXPECT_TRUE(throws_input_error([&] { list_inputs({d + "/missing"}, true); }, d + "/missing"));
}

TEST(InputList, LinksToDirectoriesFifosAndBrokenLinksInATreeAreRefused) {
  auto tree = [](const std::string& odd_one) {
    const std::string t = temp_dir() + "/t";
    fs::create_directories(t + "/sub");
    write_text(t + "/sub/a.txt", "x\n");
    int rc = 0;
    if (odd_one == "dirlink") rc = ::symlink((t + "/sub").c_str(), (t + "/dirlink").c_str());
    if (odd_one == "pipe") rc = ::mkfifo((t + "/pipe").c_str(), 0600);
    if (odd_one == "broken") rc = ::symlink((t + "/nothing").c_str(), (t + "/broken").c_str());
    EXPECT_EQ(rc, 0) << odd_one;
    return t;
  };
  for (const auto& [odd_one, fragment] : {std::pair<std::string, std::string>{"dirlink", "link to a directory"},
                                          {"pipe", "a FIFO"}, {"broken", "broken link"}}) {
    const std::string t = tree(odd_one);
    EXPECT_TRUE(throws_input_error([&] { list_inputs({t}, true); }, fragment));
    EXPECT_TRUE(throws_input_error([&] { list_inputs({t}, true); }, t + "/" + odd_one));
    EXPECT_EQ(names(list_inputs({t + "/sub"}, true)), Strings{"a.txt"});
  }
}

// ---- AtomicFileGroup -----------------------------------------------------------------------

TEST(AtomicFileGroup, FilesAppearTogetherAtFlush) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/sub");
  write_text(d + "/c.txt", "old");
  const Strings paths{d + "/a.txt", d + "/sub/b.txt", d + "/c.txt"};
  AtomicFileGroup group;
  for (const std::string& p : paths) {
    group.begin(p);
    group.write(p.data(), p.size());
    group.write("\n", 1);
    group.end();
  }
  EXPECT_FALSE(exists(d + "/a.txt"));  // still temporaries
  EXPECT_FALSE(exists(d + "/sub/b.txt"));
  EXPECT_EQ(slurp(d + "/c.txt"), "old");  // replaced only at flush
  EXPECT_EQ(listing(d).size(), 4u);
  group.flush();
  for (const std::string& p : paths) EXPECT_EQ(slurp(p), p + "\n");
  EXPECT_EQ(listing(d), (Strings{"a.txt", "c.txt", "sub/b.txt"}));
  group.flush();  // nothing more to do
  EXPECT_EQ(listing(d).size(), 3u);
}

TEST(AtomicFileGroup, DroppedOrNotFlushedLeavesNothing) {
  const std::string d = temp_dir();
  write_text(d + "/old.txt", "old");
  {
    AtomicFileGroup group;
    group.begin(d + "/dropped.txt");
    group.write("x", 1);
    EXPECT_TRUE(has_temporary(d));
    group.drop();
    EXPECT_EQ(listing(d), (Strings{"old.txt"}));
    group.begin(d + "/a.txt");
    group.write("a", 1);
    group.end();
    group.begin(d + "/old.txt");
    group.write("new", 3);
    group.end();
    group.begin(d + "/open.txt");  // begun, never ended
    group.write("o", 1);
    EXPECT_EQ(listing(d).size(), 4u);
  }
  EXPECT_EQ(listing(d), (Strings{"old.txt"}));
  EXPECT_EQ(slurp(d + "/old.txt"), "old");
}

TEST(AtomicFileGroup, AFullGroupIsFlushedByItself) {
  const std::string d = temp_dir();
  AtomicFileGroup group(2);
  for (const char* name : {"/1", "/2", "/3"}) {
    group.begin(d + name);
    group.write(name, 2);
    group.end();
  }
  EXPECT_EQ(slurp(d + "/1"), "/1");  // the first two: a group of max_files
  EXPECT_EQ(slurp(d + "/2"), "/2");
  EXPECT_FALSE(exists(d + "/3"));
  group.flush();
  EXPECT_EQ(slurp(d + "/3"), "/3");
}

// ---- Evaluation merge ----------------------------------------------------------------------

using Sentences = std::vector<Strings>;

/// Everything an Evaluation holds, as text (counts, figures, labels, reports).
std::string summary(const Evaluation& e) {
  std::ostringstream s;
  s.precision(17);
  auto counts = [&](const std::string& name, const ChunkCounts& c) {
    s << ' ' << name << '=' << c.correct << '/' << c.gold << '/' << c.guessed;
  };
  s << "mode " << int(e.mode) << ", labels";
  for (const std::string& l : e.labels) s << ' ' << l;
  s << "\nchunk " << e.chunk.tokens() << ' ' << e.chunk.correct_tokens() << ' ' << e.chunk.accuracy();
  counts("overall", e.chunk.overall());
  for (const auto& [type, c] : e.chunk.by_type()) counts(type, c);
  s << "\nitem " << e.item.tokens() << ' ' << e.item.correct_tokens() << ' ' << e.item.sentences() << ' '
    << e.item.correct_sentences() << ' ' << e.item.accuracy() << ' ' << e.item.macro_f1();
  for (const auto& [label, c] : e.item.by_label()) counts(label, c);
  s << "\nconfusions";
  for (const auto& [pair, n] : e.item.confusions()) s << ' ' << pair.first << '>' << pair.second << '=' << n;
  s << "\n" << e.headline() << "\n" << e.report(true) << e.chunk.report() << e.item.report();
  return s.str();
}

TEST(EvalMerge, TwoPartsMergedAreTheWhole) {
  // The test slice's gold labels, and a guess with every seventh token wrong.
  Sentences gold, guess;
  std::size_t t = 0;
  for (const ConllSentence& sentence : read_conll(data_path("conll2000.test100.txt"))) {
    gold.emplace_back();
    guess.emplace_back();
    for (const ConllToken& token : sentence) {
      gold.back().push_back(token.columns.back());
      guess.back().push_back(++t % 7 ? token.columns.back() : t % 2 ? "I-NP" : "O");
    }
  }
  const Sentences gold1(gold.begin(), gold.begin() + 40), guess1(guess.begin(), guess.begin() + 40);
  const Sentences gold2(gold.begin() + 40, gold.end()), guess2(guess.begin() + 40, guess.end());
  const Evaluation whole = evaluate(gold, guess);
  ASSERT_EQ(whole.mode, EvalMode::chunk);
  ASSERT_LT(whole.chunk.overall().correct, whole.chunk.overall().gold);  // errors to count
  ASSERT_FALSE(whole.item.confusions().empty());

  Evaluation merged = evaluate(gold1, guess1);
  merged.merge(evaluate(gold2, guess2), {});
  EXPECT_EQ(summary(merged), summary(whole));
  Evaluation from_empty;  // a total begun empty
  from_empty.merge(evaluate(gold1, guess1), {});
  from_empty.merge(evaluate(gold2, guess2), {});
  EXPECT_EQ(summary(from_empty), summary(whole));

  // The evaluators' own merges.
  ChunkEvaluator chunk = evaluate(gold1, guess1).chunk;
  chunk.merge(evaluate(gold2, guess2).chunk);
  EXPECT_EQ(chunk.report(), whole.chunk.report());
  ItemEvaluator item = evaluate(gold1, guess1).item;
  item.merge(evaluate(gold2, guess2).item);
  EXPECT_EQ(item.report() + item.confusion_report(), whole.item.report() + whole.item.confusion_report());
}

TEST(EvalMerge, TheModeIsResolvedOverAllLabels) {
  const Sentences gold1{{"B-NP", "I-NP", "O"}, {"B-VP"}}, guess1{{"B-NP", "B-NP", "O"}, {"B-VP"}};
  const Sentences gold2{{"NN", "B-NP"}}, guess2{{"NN", "VB"}};  // not chunk tags
  Sentences gold = gold1, guess = guess1;
  gold.insert(gold.end(), gold2.begin(), gold2.end());
  guess.insert(guess.end(), guess2.begin(), guess2.end());
  Evaluation merged = evaluate(gold1, guess1);
  ASSERT_EQ(merged.mode, EvalMode::chunk);
  merged.merge(evaluate(gold2, guess2), {});
  ASSERT_EQ(evaluate(gold, guess).mode, EvalMode::item);
  EXPECT_EQ(summary(merged), summary(evaluate(gold, guess)));
  EvalOptions chunk_mode;  // forced: stays chunk
  chunk_mode.mode = EvalMode::chunk;
  Evaluation forced = evaluate(gold1, guess1, chunk_mode);
  forced.merge(evaluate(gold2, guess2, chunk_mode), chunk_mode);
  EXPECT_EQ(summary(forced), summary(evaluate(gold, guess, chunk_mode)));
}

}  // namespace
}  // namespace crfx
