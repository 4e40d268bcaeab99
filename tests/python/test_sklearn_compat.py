"""What a sklearn-crfsuite user expects of crfx.CRF beyond fit and predict: pickling, crfx.metrics,
verbose training and its log, the model's attributes, generators and numpy scalars as input,
parameter errors that name the parameter, and the estimator's repr.

Run by ctest (Python.pytest) like test_crfx.py; the tests that need scikit-learn, numpy or
joblib are skipped without them.
"""
import copy
import os
import pickle
import re
import sys

import pytest

import crfx
from crfx import metrics
from test_crfx import DATA, features_and_labels, read_conll


@pytest.fixture(scope="module")
def small():
    """50 training sentences, 10 test sentences of CoNLL-2000 chunking."""
    train = read_conll(os.path.join(DATA, "conll2000.train300.txt"))[:50]
    test = read_conll(os.path.join(DATA, "conll2000.test100.txt"))[:10]
    return features_and_labels(train), features_and_labels(test)


@pytest.fixture(scope="module")
def fitted(small):
    (X, y), _ = small
    return crfx.CRF(c1=0.05, c2=0.1, max_iterations=15, threads=1).fit(X, y)


# ---- pickling ----------------------------------------------------------------------------------

def same_model(a, b, X):
    assert a.predict(X) == b.predict(X)
    assert a.predict_marginals(X) == b.predict_marginals(X)
    assert a.classes_ == b.classes_
    assert a.state_features_ == b.state_features_
    assert a.transition_features_ == b.transition_features_
    assert a.attributes_ == b.attributes_
    assert a.size_ == b.size_
    assert a.get_params() == b.get_params()
    assert list(a.training_log_) == list(b.training_log_)
    assert a.training_log_.stop_reason == b.training_log_.stop_reason


def test_a_fitted_crf_pickles_and_deep_copies(small, fitted, tmp_path):
    _, (Xt, _) = small
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        same_model(pickle.loads(pickle.dumps(fitted, protocol=protocol)), fitted, Xt)
    copied = copy.deepcopy(fitted)
    same_model(copied, fitted, Xt)
    assert copied._model is not fitted._model
    # The pickle holds the model file's bytes: the copy saves the same file.
    fitted.save(tmp_path / "a.model")
    copied.save(tmp_path / "b.model")
    assert (tmp_path / "a.model").read_bytes() == (tmp_path / "b.model").read_bytes()
    assert fitted.size_ == os.path.getsize(tmp_path / "a.model")
    # An unfitted CRF pickles too, and stays unfitted.
    blank = pickle.loads(pickle.dumps(crfx.CRF(c2=0.5, period=3)))
    assert blank.get_params() == crfx.CRF(c2=0.5, period=3).get_params()
    with pytest.raises(ValueError, match="not trained"):
        blank.predict(Xt)


def test_a_loaded_model_pickles_without_a_training_log(small, fitted, tmp_path):
    _, (Xt, _) = small
    fitted.save(tmp_path / "m.model")
    loaded = crfx.CRF.load(tmp_path / "m.model", threads=1)
    assert loaded.training_log_ is None
    again = pickle.loads(pickle.dumps(loaded))
    assert again.training_log_ is None and again.predict(Xt) == fitted.predict(Xt)


def test_joblib_dump_and_load(small, fitted, tmp_path):
    joblib = pytest.importorskip("joblib")
    _, (Xt, _) = small
    joblib.dump(fitted, tmp_path / "crf.joblib")
    same_model(joblib.load(tmp_path / "crf.joblib"), fitted, Xt)


def test_grid_search_refits_and_its_best_estimator_pickles(small):
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GridSearchCV

    (X, y), (Xt, _) = small
    crf = crfx.CRF(max_iterations=5, threads=1)
    assert clone(crf).get_params() == crf.get_params()
    search = GridSearchCV(crf, {"c2": [0.1, 1.0]}, cv=2,
                          scoring=make_scorer(metrics.flat_f1_score, average="weighted"))
    search.fit(X, y)
    assert search.best_params_["c2"] in (0.1, 1.0)
    best = pickle.loads(pickle.dumps(search)).best_estimator_
    assert best.predict(Xt) == search.best_estimator_.predict(Xt)


# ---- crfx.metrics ------------------------------------------------------------------------------

# Flattened: true B I O O B O, predicted B O O O I O.
Y_TRUE = [["B", "I", "O"], ["O", "B"], ["O"]]
Y_PRED = [["B", "O", "O"], ["O", "I"], ["O"]]


def test_sequence_accuracy_needs_no_sklearn():
    assert metrics.sequence_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(1 / 3)
    assert metrics.sequence_accuracy_score(Y_TRUE, Y_TRUE) == 1.0
    assert metrics.sequence_accuracy_score(iter(Y_TRUE), (tuple(s) for s in Y_PRED)) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="3 sequences in y_true but 2 in y_pred"):
        metrics.sequence_accuracy_score(Y_TRUE, Y_PRED[:2])


def test_flat_scores_are_sklearns_on_the_flattened_labels():
    pytest.importorskip("sklearn")
    assert metrics.flat_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(4 / 6)
    assert metrics.flat_accuracy_score(Y_TRUE, Y_PRED, normalize=False) == 4
    # B: precision 1/1, recall 1/2, F1 2/3; I: 0, 0, 0; O: precision 3/4, recall 3/3.
    assert metrics.flat_precision_score(Y_TRUE, Y_PRED, average="macro", labels=["B", "I"]) == pytest.approx(0.5)
    assert metrics.flat_recall_score(Y_TRUE, Y_PRED, average="macro", labels=["B", "I"]) == pytest.approx(0.25)
    assert metrics.flat_f1_score(Y_TRUE, Y_PRED, average="macro", labels=["B", "I"]) == pytest.approx(1 / 3)
    assert metrics.flat_precision_score(Y_TRUE, Y_PRED, average=None, labels=["O"])[0] == pytest.approx(0.75)
    assert metrics.flat_f1_score(Y_TRUE, Y_PRED, average="micro") == pytest.approx(4 / 6)
    report = metrics.flat_classification_report(Y_TRUE, Y_PRED, labels=["B", "I"], digits=3)
    assert re.search(r"\bB\s+1\.000\s+0\.500\s+0\.667\s+2\b", report), report
    assert re.search(r"\bI\s+0\.000\s+0\.000\s+0\.000\s+1\b", report), report
    with pytest.raises(ValueError, match="sequence 1: 2 labels in y_true but 1 in y_pred"):
        metrics.flat_accuracy_score(Y_TRUE, [["B", "O", "O"], ["O"], ["O"]])


def test_flat_scores_without_sklearn_say_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn raises ImportError
    with pytest.raises(ImportError, match="need scikit-learn"):
        metrics.flat_f1_score(Y_TRUE, Y_PRED, average="macro")


# ---- verbose and the training log --------------------------------------------------------------

LINE = re.compile(r"^iter +(\d+)  passes +[\d.]+  obj -?[\d.e+-]+  \|g\| \S+  active \d+  step \S+  [\d.]+ s$")


def test_verbose_prints_progress_lines_and_the_log_has_every_iteration(small, capfd):
    (X, y), _ = small
    crf = crfx.CRF(c2=0.1, max_iterations=6, threads=1, verbose=True).fit(X, y)
    err = capfd.readouterr().err.splitlines()
    assert [int(LINE.match(line).group(1)) for line in err[:-1]] == [1, 2, 3, 4, 5, 6], err
    assert err[-1] == "stopped: --max-iterations 6 reached"
    log = crf.training_log_
    assert len(log) == 6 and log.stop_reason == "--max-iterations 6 reached"
    assert [r["iteration"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert set(log[0]) == {"iteration", "passes", "objective", "gradient_norm", "active_features", "step",
                           "seconds"}
    assert log.iterations == list(log) and log.last_iteration == log[-1]
    assert all(r["objective"] > 0 and r["gradient_norm"] > 0 and r["active_features"] > 0 for r in log)
    assert log[-1]["objective"] < log[0]["objective"]
    assert all(a["seconds"] <= b["seconds"] and a["passes"] < b["passes"] for a, b in zip(log, log[1:]))


def test_quiet_training_prints_nothing_and_keeps_the_log(small, capfd):
    (X, y), _ = small
    crf = crfx.CRF(c2=0.1, max_iterations=4, threads=1).fit(X, y)
    assert capfd.readouterr().err == ""
    assert [r["iteration"] for r in crf.training_log_] == [1, 2, 3, 4]
    # The stochastic trainers log their epochs.
    ap = crfx.CRF(algorithm="ap", epochs=3, threads=1).fit(X, y)
    assert [r["iteration"] for r in ap.training_log_] == [1, 2, 3]


def test_train_file_verbose_goes_to_sys_stderr(tmp_path, capsys):
    crf = crfx.train_file(os.path.join(DATA, "conll2000.test100.txt"), tmp_path / "m.model",
                          template=os.path.join(DATA, "chunking.template"), max_iterations=3, threads=1, verbose=True)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(LINE.match(line) for line in err[:3]), err
    assert len(crf.training_log_) == 3


# ---- the model's attributes --------------------------------------------------------------------

def test_attributes_and_size(fitted, tmp_path):
    attributes = fitted.attributes_
    assert fitted.num_attributes_ == len(attributes) == len(set(attributes)) > 0
    assert set(attributes) == {a for a, _ in fitted.state_features_}
    assert "postag=NN" in attributes
    fitted.save(tmp_path / "m.model")
    assert fitted.size_ == os.path.getsize(tmp_path / "m.model")
    loaded = crfx.CRF.load(tmp_path / "m.model")
    assert loaded.attributes_ == attributes and loaded.size_ == fitted.size_
    assert loaded.classes_ == fitted.classes_
    for name in ("attributes_", "num_attributes_", "size_", "classes_", "state_features_", "transition_features_",
                 "training_log_"):
        with pytest.raises(ValueError, match="not trained"):
            getattr(crfx.CRF(), name)


# ---- inputs ------------------------------------------------------------------------------------

def test_generators_as_X_and_y(small):
    (X, y), (Xt, _) = small
    reference = crfx.CRF(c2=0.1, max_iterations=5, threads=1).fit(X, y)
    crf = crfx.CRF(c2=0.1, max_iterations=5, threads=1).fit((iter(s) for s in X), (iter(labels) for labels in y))
    assert crf.state_features_ == reference.state_features_
    assert crf.predict(s for s in Xt) == reference.predict(Xt)
    assert crf.predict_marginals(iter(Xt)) == reference.predict_marginals(Xt)
    assert crf.score((s for s in Xt), small[1][1]) == reference.score(Xt, small[1][1])
    with pytest.raises(ValueError, match="3 sequences in X but 2 in y"):
        crfx.CRF().fit((s for s in X[:3]), (labels for labels in y[:2]))


def test_numpy_scalars_are_numbers(small):
    np = pytest.importorskip("numpy")
    (X, y), (Xt, _) = small
    X, Xt = X[:20], Xt[:3]

    def as_numpy(seqs):
        convert = {bool: np.bool_, int: np.int64, float: np.float64}
        return [[{k: convert[type(v)](v) if type(v) in convert else v for k, v in token.items()} for token in seq]
                for seq in seqs]

    X_np = as_numpy(X)
    assert isinstance(X_np[0][0]["word.isupper()"], np.bool_) and isinstance(X_np[0][0]["bias"], np.float64)
    reference = crfx.CRF(c2=0.1, max_iterations=5, threads=1).fit(X, y[:20])
    crf = crfx.CRF(c2=np.float64(0.1), max_iterations=np.int64(5), threads=np.int64(1),
                   all_possible_transitions=np.bool_(False)).fit(X_np, y[:20])
    assert crf.state_features_ == reference.state_features_
    assert crf.predict(as_numpy(Xt)) == reference.predict(Xt)
    small_types = [[{"a": np.int32(2), "b": np.float32(0.5), "c": np.uint8(1), "d": np.bool_(False)}], [{"a": 1}]]
    plain = [[{"a": 2, "b": 0.5, "c": 1, "d": False}], [{"a": 1}]]
    labels = [["A"], ["B"]]
    assert (crfx.CRF(max_iterations=3).fit(small_types, labels).state_features_ ==
            crfx.CRF(max_iterations=3).fit(plain, labels).state_features_)


def test_bad_settings_name_the_parameter(small, tmp_path):
    (X, y), _ = small
    X, y = X[:5], y[:5]
    for kwargs, message in [
        ({"threads": -1}, r"threads: a number of CPU threads >= 0 \(0: all cores\), got -1"),
        ({"threads": "4"}, r"threads: .*, got '4'"),
        ({"threads": 1.5}, r"threads: .*, got 1.5"),
        ({"min_freq": -2}, r"min_freq: an int >= 0, got -2"),
        ({"device": "gpu"}, r"device: one of 'auto', 'cpu', 'cuda', got 'gpu'"),
        ({"algorithm": None}, r"algorithm: a str, got None"),
        ({"type": 1}, r"type: a str, got 1"),
        ({"all_possible_states": "yes"}, r"all_possible_states: True or False, got 'yes'"),
        ({"verbose": 2}, r"verbose: True or False, got 2"),
        ({"max_memory": -1}, r"max_memory: a number of bytes > 0"),
        ({"c1": -1.0}, r"c1: "),
        ({"c2": "x"}, r"c2: "),
        ({"max_iterations": -1}, r"max_iterations: "),
    ]:
        with pytest.raises(ValueError, match=message):
            crfx.CRF(**kwargs).fit(X, y)
    with pytest.raises(ValueError, match=r"threads: .*, got -1"):
        crfx.train_file(os.path.join(DATA, "conll2000.test100.txt"), tmp_path / "m.model",
                        template=os.path.join(DATA, "chunking.template"), threads=-1)
    with pytest.raises(ValueError, match=r"threads: .*, got -1"):
        crfx.CRF.load(tmp_path / "missing.model", threads=-1)


def test_nan_values_name_the_sequence_and_token():
    with pytest.raises(ValueError, match=r"<X>: sequence 1, token 2: attribute 'a': value nan is not a finite number"):
        crfx.CRF().fit([[{"a": 1.0}], [{"a": 1.0}, {"b": 1.0}, {"a": float("nan")}]], [["A"], ["A", "B", "A"]])
    with pytest.raises(ValueError, match=r"sequence 0, token 0: attribute 'a': value inf is not a finite number"):
        crfx.CRF().fit([[[("a", float("inf"))]]], [["A"]])


# ---- repr --------------------------------------------------------------------------------------

def test_repr_shows_the_arguments_that_differ_from_the_defaults():
    assert repr(crfx.CRF()) == "CRF()"
    assert repr(crfx.CRF(algorithm="lbfgs", c2=0.1)) == "CRF(c2=0.1)"
    crf = crfx.CRF(algorithm="sag", c1=0.0, threads=2, all_possible_transitions=True, verbose=True, epochs=5)
    assert repr(crf) == "CRF(algorithm='sag', c1=0.0, all_possible_transitions=True, threads=2, verbose=True, epochs=5)"
    assert eval(repr(crf), {"CRF": crfx.CRF}).get_params() == crf.get_params()
    crf.set_params(c1=None, epochs=7)
    assert repr(crf) == "CRF(algorithm='sag', all_possible_transitions=True, threads=2, verbose=True, epochs=7)"
