"""The crfx Python module against the crfx tool, sklearn-crfsuite's workflow, and bad input.

Run by ctest (Python.pytest) with PYTHONPATH at the build tree's python/ folder, CRFX_BINARY the
crfx tool and CRFX_TEST_DATA tests/data.
"""
import os
import signal
import subprocess
import threading
import time

import pytest

import crfx

CRFX = os.environ.get("CRFX_BINARY", "crfx")
DATA = os.environ.get("CRFX_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "data"))


def read_conll(path):
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields:
                if current:
                    sentences.append(current)
                current = []
            else:
                current.append(fields)
    if current:
        sentences.append(current)
    return sentences


def word_features(sentence, i):
    """sklearn-crfsuite's tutorial features: the word, its shape and suffixes, its neighbours."""
    word = sentence[i][0]
    f = {
        "bias": 1.0,
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word[-2:]": word[-2:],
        "word.isupper()": word.isupper(),
        "word.istitle()": word.istitle(),
        "word.isdigit()": word.isdigit(),
        "postag": sentence[i][1],
    }
    if i > 0:
        f["-1:word.lower()"] = sentence[i - 1][0].lower()
        f["-1:word.istitle()"] = sentence[i - 1][0].istitle()
    else:
        f["BOS"] = True
    if i < len(sentence) - 1:
        f["+1:word.lower()"] = sentence[i + 1][0].lower()
    else:
        f["EOS"] = True
    return f


def features_and_labels(sentences):
    X = [[word_features(s, i) for i in range(len(s))] for s in sentences]
    y = [[token[-1] for token in s] for s in sentences]
    return X, y


def escape(name):
    return name.replace("\\", "\\\\").replace(":", "\\:")


def crfsuite_line(label, features):
    """One token as a CRFsuite attribute line, the way the module reads a feature dict."""
    items = []
    for name, value in features.items():
        if isinstance(value, str):
            items.append(escape(f"{name}={value}"))
        else:
            items.append(f"{escape(name)}:{float(value)!r}")
    return "\t".join([label] + items)


def write_crfsuite(path, X, y):
    with open(path, "w", encoding="utf-8") as f:
        for xseq, yseq in zip(X, y):
            for features, label in zip(xseq, yseq):
                f.write(crfsuite_line(label, features) + "\n")
            f.write("\n")


@pytest.fixture(scope="module")
def chunking():
    train = read_conll(os.path.join(DATA, "conll2000.train300.txt"))
    test = read_conll(os.path.join(DATA, "conll2000.test100.txt"))
    return features_and_labels(train), features_and_labels(test)


def test_the_estimator_trains_the_model_crfx_train_trains(chunking, tmp_path):
    (X, y), (Xt, yt) = chunking
    crf = crfx.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=20, threads=2)
    crf.fit(X, y)
    # lbfgs with c1 > 0 is OWL-QN (as in CRFsuite), and says why it stopped.
    assert crf.training_log_.stop_reason == "--max-iterations 20 reached"
    assert [r["iteration"] for r in crf.training_log_] == list(range(1, 21))
    crf.save(tmp_path / "py.model")
    write_crfsuite(tmp_path / "train.txt", X, y)
    write_crfsuite(tmp_path / "test.txt", Xt, yt)
    subprocess.run([CRFX, "train", str(tmp_path / "train.txt"), "--format", "crfsuite", "-a", "lbfgs", "--c1", "0.1",
                    "--c2", "0.1", "--max-iterations", "20", "--threads", "1", "-q", "-m", str(tmp_path / "cli.model")],
                   check=True)
    assert (tmp_path / "py.model").read_bytes() == (tmp_path / "cli.model").read_bytes()
    tagged = subprocess.run([CRFX, "tag", str(tmp_path / "test.txt"), "-m", str(tmp_path / "cli.model"), "-q"],
                            check=True, capture_output=True, text=True).stdout
    cli_labels = [[line.split("\t")[-1] for line in block.splitlines()] for block in tagged.strip("\n").split("\n\n")]
    assert crf.predict(Xt) == cli_labels
    assert crf.score(Xt, yt) > 0.9


def test_marginals_weights_save_and_load(chunking, tmp_path):
    (X, y), (Xt, _) = chunking
    crf = crfx.CRF(c2=1.0, max_iterations=10, delta=1e-4)
    assert crf.get_params()["max_iterations"] == 10 and crf.get_params()["delta"] == 1e-4
    crf.set_params(max_iterations=30, period=5)
    assert crf.get_params()["max_iterations"] == 30 and crf.params == {"delta": 1e-4, "period": 5}
    crf.set_params(delta=1e-5)
    crf.fit(X, y)
    assert 0 < len(crf.training_log_) <= 30
    marginals = crf.predict_marginals(Xt[:5])
    best = crf.predict(Xt[:5])
    for seq_m, seq_y in zip(marginals, best):
        for token, label in zip(seq_m, seq_y):
            assert set(token) == set(crf.classes_)
            assert sum(token.values()) == pytest.approx(1.0, abs=1e-9)
            assert all(0.0 <= p <= 1.0 for p in token.values())
    assert crf.predict_marginals_single(Xt[0]) == marginals[0]
    states, transitions = crf.state_features_, crf.transition_features_
    assert ("postag=DT", "B-NP") in states and states[("postag=DT", "B-NP")] > 0
    assert all(a in crf.classes_ and b in crf.classes_ for a, b in transitions)
    assert transitions[("B-NP", "I-NP")] > transitions[("B-NP", "B-NP")]
    crf.save(tmp_path / "m.model")
    loaded = crfx.CRF.load(tmp_path / "m.model")
    assert loaded.predict(Xt) == crf.predict(Xt)
    assert loaded.state_features_ == states
    dump = subprocess.run([CRFX, "dump", str(tmp_path / "m.model")], check=True, capture_output=True, text=True).stdout
    assert "labels: " + str(len(crf.classes_)) in dump


def test_sklearn_crfsuite_tutorial_workflow_on_spanish_ner():
    train = read_conll(os.path.join(DATA, "conll2002.esp.train300.txt"))
    test = read_conll(os.path.join(DATA, "conll2002.esp.testb100.txt"))
    X, y = features_and_labels(train)
    Xt, yt = features_and_labels(test)
    crf = crfx.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True)
    crf.fit(X, y)
    labels = [label for label in crf.classes_ if label != "O"]
    assert sorted(labels) == ["B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]
    predicted = crf.predict(Xt)
    # Entity tokens found: precision and recall over the labels other than O (the tutorial's
    # flat F1), far above guessing O everywhere (F1 0).
    tp = sum(1 for ys, ps in zip(yt, predicted) for g, p in zip(ys, ps) if g == p and g != "O")
    guessed = sum(1 for ps in predicted for p in ps if p != "O")
    gold = sum(1 for ys in yt for g in ys if g != "O")
    f1 = 2 * tp / (guessed + gold)
    assert f1 > 0.4, f1
    assert ("B-PER", "I-PER") in crf.transition_features_


def test_file_helpers_are_the_command_line(tmp_path):
    train = os.path.join(DATA, "conll2000.train300.txt")
    test = os.path.join(DATA, "conll2000.test100.txt")
    template = os.path.join(DATA, "chunking.template")
    crfx.train_file(train, tmp_path / "py.model", template=template, max_iterations=10)
    subprocess.run([CRFX, "train", train, "-t", template, "--max-iterations", "10", "-q", "-m",
                    str(tmp_path / "cli.model")], check=True)
    assert (tmp_path / "py.model").read_bytes() == (tmp_path / "cli.model").read_bytes()
    stats = crfx.tag_file(tmp_path / "py.model", [test, test], output=tmp_path / "py.tagged")
    assert stats["inputs"] == 2 and stats["sentences"] == 200 and stats["failures"] == []
    cli = subprocess.run([CRFX, "tag", test, test, "-m", str(tmp_path / "cli.model"), "-q"], check=True,
                         capture_output=True, text=True).stdout
    assert (tmp_path / "py.tagged").read_text() == cli
    stats = crfx.tag_file(tmp_path / "py.model", [test], output_dir=tmp_path / "out", suffix=".tagged")
    assert (tmp_path / "out" / "conll2000.test100.txt.tagged").read_text() == cli[: len(cli) // 2]


def test_bad_input_raises_clear_exceptions(chunking, tmp_path):
    (X, y), _ = chunking
    with pytest.raises(ValueError, match="300 sequences in X but 2 in y"):
        crfx.CRF().fit(X, y[:2])
    with pytest.raises(ValueError, match="sequence 1: 1 tokens but 2 labels"):
        crfx.CRF().fit([[{"a": 1}], [{"a": 1}]], [["A"], ["A", "B"]])
    with pytest.raises(TypeError, match="feature 'a' has a value of type dict"):
        crfx.CRF().fit([[{"a": {"b": 1}}]], [["A"]])
    with pytest.raises(ValueError, match="'not_a_setting' is not a training setting"):
        crfx.CRF(not_a_setting=1).fit(X, y)
    with pytest.raises(ValueError, match="'epochs' is not a setting of lbfgs"):
        crfx.CRF(epochs=3).fit(X, y)
    with pytest.raises(ValueError, match="unknown"):
        crfx.CRF(algorithm="crf-l3").fit(X, y)
    # The checks of crfx train (one library entry point): values the CLI refuses, in its words.
    with pytest.raises(ValueError, match=r"sequence 1, token 0: attribute 'a': value 1e\+11 is beyond ±1e10, "
                                         r"the range crfx accepts \(scale the values down\)"):
        crfx.CRF().fit([[{"a": 1.0}], [{"a": 1e11}]], [["A"], ["B"]])
    with pytest.raises(ValueError, match="no attributes in the data"):
        crfx.CRF().fit([[[]], [[]]], [["A"], ["B"]])
    with pytest.raises(ValueError, match="not trained"):
        crfx.CRF().predict(X)
    with pytest.raises(OSError, match="cannot open model file"):
        crfx.CRF.load(tmp_path / "missing.model")
    (tmp_path / "bad.txt").write_text("a b\nc\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: "):
        crfx.train_file(tmp_path / "bad.txt", tmp_path / "x.model", template=os.path.join(DATA, "chunking.template"))
    assert not (tmp_path / "x.model").exists()


def test_a_run_that_cannot_fit_is_refused_before_it_allocates(chunking, tmp_path):
    (X, y), _ = chunking
    # crfx train --max-memory's check: the estimate against the limit, MemoryError with the figures.
    with pytest.raises(MemoryError, match=r"this training run needs an estimated .* more \(weights .*"
                                          r"optimizer state .*\) but 100.0 KB is available on cpu.*; raise min_freq"):
        crfx.CRF(max_memory=100e3, device="cpu").fit(X, y)
    with pytest.raises(MemoryError, match=r"but 20.0 MB is available on cpu.*; all_possible_states gives"):
        crfx.train_file(os.path.join(DATA, "conll2000.train300.txt"), tmp_path / "x.model",
                        template=os.path.join(DATA, "chunking.template"), all_possible_states=True,
                        max_memory=20e6, device="cpu", max_iterations=2)
    # Files are compiled streamed, the memory checked as they are read: data that alone cannot fit.
    with pytest.raises(MemoryError, match=r"this training run cannot fit: reading .*conll2000.train300.txt "
                                          r"\(\d+ sentences, to line \d+\), the compiled data alone takes .* but "
                                          r"1.0 MB was available \(the limit given\); raise min_freq"):
        crfx.train_file(os.path.join(DATA, "conll2000.train300.txt"), tmp_path / "x.model",
                        template=os.path.join(DATA, "chunking.template"), max_memory=1e6, device="cpu")
    assert not (tmp_path / "x.model").exists()
    with pytest.raises(ValueError, match="max_memory: a number of bytes > 0"):
        crfx.CRF(max_memory="8G").fit(X, y)
    crf = crfx.CRF(max_memory=1e9, max_iterations=2, device="cpu").fit(X, y)  # fits
    assert crf.get_params()["max_memory"] == 1e9
    assert len(crf.predict(X[:3])) == 3
    # The GPU's budget (crfx train --max-device-memory): checked here, and no effect on the CPU.
    with pytest.raises(ValueError, match="max_device_memory: a number of bytes > 0"):
        crfx.CRF(max_device_memory=-1).fit(X, y)
    capped = crfx.CRF(max_device_memory=1e6, max_iterations=2, device="cpu").fit(X, y)
    assert capped.get_params()["max_device_memory"] == 1e6
    assert capped._model.to_bytes() == crf._model.to_bytes()


def test_training_releases_the_gil(chunking):
    (X, y), _ = chunking
    ticks = 0
    done = threading.Event()

    def train():
        crfx.CRF(max_iterations=40, threads=1).fit(X, y)
        done.set()

    worker = threading.Thread(target=train)
    worker.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    assert ticks > 10, "the main thread did not run while training"


def test_ctrl_c_stops_training_with_keyboard_interrupt(chunking):
    (X, y), _ = chunking
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        crfx.CRF(algorithm="sgd-l1", epochs=1000000, c1=0.0, c2=1.0, threads=1).fit(X, y)
    timer.join()
    assert time.monotonic() - started < 30


def test_maxent_models_from_python_are_the_command_lines(chunking, tmp_path):
    (X, y), (Xt, yt) = chunking
    crf = crfx.CRF(algorithm="cd", type="maxent", c2=0.05, max_iterations=15, threads=1)
    assert crf.get_params()["type"] == "maxent"
    crf.fit(X, y)
    assert crf.transition_features_ == {}, "a Maxent model has no transitions"
    assert crf.score(Xt, yt) > 0.85
    crf.save(tmp_path / "py.model")
    write_crfsuite(tmp_path / "train.txt", X, y)
    subprocess.run([CRFX, "train", str(tmp_path / "train.txt"), "--format", "crfsuite", "--type", "maxent", "-a", "cd",
                    "--c2", "0.05", "--max-iterations", "15", "--threads", "1", "-q", "-m",
                    str(tmp_path / "cli.model")], check=True)
    assert (tmp_path / "py.model").read_bytes() == (tmp_path / "cli.model").read_bytes()
    # From files: the template's B line is ignored, with crfx train's note as a warning.
    train = os.path.join(DATA, "conll2000.train300.txt")
    template = os.path.join(DATA, "chunking.template")
    with pytest.warns(UserWarning, match="ignores the template's B line"):
        crfx.train_file(train, tmp_path / "f.model", template=template, type="maxent", algorithm="lbfgs",
                        max_iterations=10)
    subprocess.run([CRFX, "train", train, "-t", template, "--type", "maxent", "--max-iterations", "10", "-q", "-m",
                    str(tmp_path / "f-cli.model")], check=True, capture_output=True)
    assert (tmp_path / "f.model").read_bytes() == (tmp_path / "f-cli.model").read_bytes()
    # Seed 001's trainers: Maxent only, CPU only.
    with pytest.raises(ValueError, match='algorithm gis trains Maxent models: add type="maxent"'):
        crfx.CRF(algorithm="gis").fit(X, y)
    with pytest.raises(ValueError, match="algorithm scgis: .*; use device=\"cpu\""):
        crfx.CRF(algorithm="scgis", type="maxent", device="cuda").fit(X, y)
    with pytest.raises(ValueError, match="type: "):
        crfx.CRF(type="hmm").fit(X, y)
