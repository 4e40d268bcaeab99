"""crfx from Python: linear-chain conditional random fields, trained and applied by crfx's C++
core on every CPU core (or a GPU).

The estimator follows sklearn-crfsuite's ``CRF``: X is a list of sequences, each a list of
per-token features — a dict ``{"word.lower()": "the", "postag": "DT", "bias": 1.0}`` (a str value
makes the attribute ``name=value`` with weight 1, a number or bool is the attribute's value) or a
list of feature names — and y the matching lists of labels::

    import crfx
    crf = crfx.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100)
    crf.fit(X_train, y_train)
    y_pred = crf.predict(X_test)
    crf.save("ner.model")        # a crfx model file: `crfx tag`, `crfx dump` read it

X, y and their sequences may be any iterables (generators too); feature values may be numpy
scalars. A fitted CRF pickles (pickle, copy.deepcopy, joblib) through its model file's bytes.
``crfx.metrics`` has sklearn_crfsuite.metrics' scores (they need scikit-learn).

File helpers mirror the command line: ``crfx.train_file`` (``crfx train``) and
``crfx.tag_file`` (``crfx tag``). Errors are ValueError (bad data or settings, with crfx's
message naming the sequence or the file and line) or OSError (a file that cannot be read).
Training and tagging release the GIL; Ctrl-C stops training after the current iteration (the
stochastic trainers: after the current mini-batch) and raises KeyboardInterrupt. Nothing beyond the standard library is needed.
"""

import numbers
import operator
import os
import tempfile

from . import _crfx

__all__ = ["CRF", "TrainingLog", "train_file", "tag_file", "algorithms", "metrics", "__version__"]
__version__ = "0.1.0"


def algorithms():
    """The training algorithms, as ``crfx train --algo list`` names them."""
    return list(_crfx.algorithms())


class CRF:
    """A linear-chain CRF with sklearn-crfsuite's interface.

    algorithm: lbfgs (default), owlqn, rprop, sgd-l1, two-stage, sag, saga, adf, l2sgd, ap, pa,
    arow, mira, bcd (the names of ``crfx train --algo``; sklearn-crfsuite's l2sgd, ap, pa and arow
    are crfx's, CRF++'s MIRA is mira, Wapiti's bcd is bcd, CPU only); for
    Maxent models also gis, iis, scgis and cd (Huang, Hsieh, Chang & Lin 2009; CPU only).
    type: "crf" (the default, a linear-chain CRF) or "maxent" (``crfx train --type``: every token
    labelled on its own, Wapiti's ``-T maxent``; no transition features).
    c1, c2: the L1 and L2 penalties (CRFsuite's convention). max_iterations and any other
    setting of the algorithm (``period``, ``delta``, ``epsilon``, ``epochs``, ``seed``, …, as
    ``crfx train --algo list`` shows them with dashes for underscores) go by keyword.
    loss: "seq-log" (the default, the NLL), "seq-exp", "point-log" or "point-exp" (``crfx train
    --loss``; the losses of Altun, Johnson & Hofmann 2003, the point ones not convex): lbfgs, owlqn, rprop, sgd-l1, two-stage
    and adf take every loss, sag and saga seq-log only.
    all_possible_states / all_possible_transitions: every attribute × label pair / every label
    bigram gets a weight (CRFsuite's feature.possible_states / possible_transitions).
    device: "auto", "cpu" or "cuda"; threads: CPU threads (0: all cores).
    max_memory: bytes a training run may hold (``crfx train --max-memory``); a run whose estimate
    exceeds it, or the memory the device has, raises MemoryError before it allocates.
    max_device_memory: bytes of GPU memory the run may use (``crfx train --max-device-memory``;
    None: what is free); a corpus that does not fit beside the weights and optimizer state is
    streamed from pinned host memory in chunks, giving the same model. No effect on the CPU.
    verbose: print crfx train's progress line for every iteration to sys.stderr as training goes
    (``training_log_`` keeps the iterations either way).
    """

    def __init__(self, algorithm="lbfgs", c1=None, c2=None, max_iterations=None,
                 all_possible_states=False, all_possible_transitions=False, min_freq=1,
                 device="auto", threads=0, model_filename=None, type="crf", max_memory=None, verbose=False,
                 max_device_memory=None, **params):
        self.algorithm = algorithm
        self.type = type
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.min_freq = min_freq
        self.device = device
        self.threads = threads
        self.model_filename = model_filename
        self.max_memory = max_memory
        self.max_device_memory = max_device_memory
        self.verbose = verbose
        self.params = params
        self._model = None
        self._log = None
        if model_filename is not None:
            self._model = _crfx.load(str(model_filename), _device(device), _count("threads", threads, 0))

    _ARGS = ("algorithm", "c1", "c2", "max_iterations", "all_possible_states", "all_possible_transitions",
             "min_freq", "device", "threads", "model_filename", "type", "max_memory", "verbose",
             "max_device_memory")
    _DEFAULTS = {"algorithm": "lbfgs", "c1": None, "c2": None, "max_iterations": None, "all_possible_states": False,
                 "all_possible_transitions": False, "min_freq": 1, "device": "auto", "threads": 0,
                 "model_filename": None, "type": "crf", "max_memory": None, "verbose": False,
                 "max_device_memory": None}

    def get_params(self, deep=True):
        """The constructor's arguments (scikit-learn's estimator protocol: clone, grid search)."""
        params = {name: getattr(self, name) for name in self._ARGS}
        params.update(self.params)
        return params

    def set_params(self, **params):
        for name, value in params.items():
            if name in self._ARGS:
                setattr(self, name, value)
            else:
                self.params[name] = value
        return self

    def __repr__(self):
        """The constructor call with the arguments that differ from the defaults (as scikit-learn
        shows an estimator)."""
        shown = [(name, getattr(self, name)) for name in self._ARGS
                 if not _same(getattr(self, name), self._DEFAULTS[name])]
        shown += list(self.params.items())
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % item for item in shown))

    # ---- pickling: the model as its file's bytes ----------------------------------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        if self._model is not None:
            state["_model"] = self._model.to_bytes()
        return state

    def __setstate__(self, state):
        state = dict(state)
        model = state.get("_model")
        if isinstance(model, bytes):
            device, threads = state.get("device", "auto"), state.get("threads", 0)
            try:
                device, threads = _device(device), _count("threads", threads, 0)
            except ValueError:  # changed by set_params after fit: the defaults tag
                device, threads = "auto", 0
            state["_model"] = _from_bytes(model, device, threads)
        self.__dict__.update(state)

    # ---- training ---------------------------------------------------------------------------
    def _settings(self):
        settings = {name: _plain(value) for name, value in self.params.items()}
        for name in ("c1", "c2", "max_iterations"):
            value = getattr(self, name)
            if value is not None:
                settings[name] = _plain(value)
        return settings

    def fit(self, X, y, X_dev=None, y_dev=None):
        """Trains on sequences X with labels y (X_dev, y_dev: scored after training, as
        ``dev_score_``). Returns self."""
        run = _run_arguments(self.algorithm, self.all_possible_states, self.all_possible_transitions, self.device,
                             self.threads, self.min_freq, self.type, self.max_memory, self.verbose,
                             self.max_device_memory)
        model = _crfx.fit(X, y, run["algorithm"], self._settings(), run["all_states"], run["all_transitions"],
                          run["device"], run["threads"], run["min_freq"], run["type"], run["max_memory"],
                          run["max_device_memory"], run["verbose"])
        self._model, self._log = model, TrainingLog(model)
        if self.model_filename is not None:
            self._model.save(str(self.model_filename))
        if X_dev is not None:
            self.dev_score_ = self.score(X_dev, y_dev)
        return self

    @property
    def training_log_(self):
        """The training run's iterations (a TrainingLog: a list of dicts with iteration, passes,
        objective, gradient_norm, active_features, step, seconds; and its stop_reason). None for a
        model loaded from a file."""
        self._check()
        return self._log

    # ---- prediction -------------------------------------------------------------------------
    def _check(self):
        if self._model is None:
            raise ValueError("the CRF is not trained: call fit (or load a model)")

    def predict(self, X):
        """The most likely label sequence of each sequence of X."""
        self._check()
        return self._model.predict(X)

    def predict_single(self, xseq):
        return self.predict([xseq])[0]

    def predict_marginals(self, X):
        """For each sequence of X, for each token, {label: p(y_t = label | x)}."""
        self._check()
        return self._model.predict_marginals(X)

    def predict_marginals_single(self, xseq):
        return self.predict_marginals([xseq])[0]

    def score(self, X, y):
        """Token accuracy of predict(X) against y (sklearn-crfsuite's flat accuracy)."""
        predicted = self.predict(X)
        total = correct = 0
        for gold_seq, pred_seq in zip(y, predicted):
            if len(gold_seq) != len(pred_seq):
                raise ValueError("a sequence of y and its prediction differ in length")
            total += len(gold_seq)
            correct += sum(1 for g, p in zip(gold_seq, pred_seq) if str(g) == p)
        return correct / total if total else 0.0

    # ---- the model --------------------------------------------------------------------------
    @property
    def classes_(self):
        self._check()
        return self._model.labels()

    @property
    def state_features_(self):
        """{(attribute, label): weight} for every non-zero state weight."""
        self._check()
        return self._model.state_features()

    @property
    def transition_features_(self):
        """{(label_from, label_to): weight} for every non-zero transition weight."""
        self._check()
        return self._model.transition_features()

    @property
    def attributes_(self):
        """The state attributes of the model (those with a non-zero weight, as its file keeps
        them), in the model's order."""
        self._check()
        return self._model.attributes()

    @property
    def num_attributes_(self):
        """How many attributes the model has (len(attributes_))."""
        return len(self.attributes_)

    @property
    def size_(self):
        """The model's size in bytes: the size of its model file (save)."""
        self._check()
        return len(self._model.to_bytes())

    def save(self, path):
        """Writes the model (atomically) as a crfx model file."""
        self._check()
        self._model.save(str(path))

    @classmethod
    def load(cls, path, device="auto", threads=0):
        """A CRF with the model of a crfx model file (trained by this module or crfx train)."""
        return cls(model_filename=str(path), device=device, threads=threads)


class TrainingLog(list):
    """A training run's iterations: one dict per iteration (iteration, passes, objective,
    gradient_norm — None where the trainer does not compute it —, active_features, step,
    seconds), with why training stopped (stop_reason)."""

    def __init__(self, model=None):
        super().__init__(model.log if model is not None else ())
        self.stop_reason = model.stop_reason if model is not None else ""

    @property
    def iterations(self):
        """The iterations as a list (sklearn-crfsuite's training_log_.iterations)."""
        return list(self)

    @property
    def last_iteration(self):
        """The last iteration's dict (None when there was none)."""
        return self[-1] if self else None


def _same(value, default):
    return value is default or (type(value) is type(default) and value == default)


def _plain(value):
    """A numpy scalar as the Python number it holds (the extension reads Python numbers)."""
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def _from_bytes(data, device, threads):
    """A model from its file's bytes (through a temporary file: the library reads model files)."""
    fd, path = tempfile.mkstemp(suffix=".model", prefix="crfx-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return _crfx.load(path, device, threads)
    finally:
        os.unlink(path)


def _bytes(name, value):
    """max_memory or max_device_memory as the extension takes it: a number of bytes > 0, or 0 for
    no limit (None)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError("%s: a number of bytes > 0 (or None), got %r" % (name, value))
    return float(value)


def _count(name, value, minimum):
    """An integer setting (threads, min_freq, nbest) checked: ValueError naming it otherwise."""
    try:
        if isinstance(value, bool) or _numpy_bool(value):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or number < minimum:
        what = "a number of CPU threads >= 0 (0: all cores)" if name == "threads" else "an int >= %d" % minimum
        raise ValueError("%s: %s, got %r" % (name, what, value))
    return number


def _text(name, value, choices=None):
    """A str setting (algorithm, type, device) checked: ValueError naming it otherwise."""
    if not isinstance(value, str) or (choices is not None and value not in choices):
        expected = "one of " + ", ".join(repr(c) for c in choices) if choices else "a str"
        raise ValueError("%s: %s, got %r" % (name, expected, value))
    return value


def _device(device):
    return _text("device", device, ("auto", "cpu", "cuda"))


def _numpy_bool(value):
    return type(value).__module__ == "numpy" and getattr(getattr(value, "dtype", None), "kind", None) == "b"


def _flag(name, value):
    if isinstance(value, bool) or _numpy_bool(value):
        return bool(value)
    raise ValueError("%s: True or False, got %r" % (name, value))


def _run_arguments(algorithm, all_possible_states, all_possible_transitions, device, threads, min_freq, type,
                   max_memory, verbose, max_device_memory=None):
    """The settings the extension takes by type, checked here so that a bad one is a ValueError
    naming it."""
    return {"algorithm": _text("algorithm", algorithm), "type": _text("type", type),
            "all_states": _flag("all_possible_states", all_possible_states),
            "all_transitions": _flag("all_possible_transitions", all_possible_transitions),
            "device": _device(device), "threads": _count("threads", threads, 0),
            "min_freq": _count("min_freq", min_freq, 0), "max_memory": _bytes("max_memory", max_memory),
            "max_device_memory": _bytes("max_device_memory", max_device_memory),
            "verbose": _flag("verbose", verbose)}


def train_file(data, model, template=None, format="conll", algorithm="lbfgs", all_possible_states=False,
               all_possible_transitions=False, min_freq=1, device="auto", threads=0, type="crf", max_memory=None,
               verbose=False, max_device_memory=None, **params):
    """``crfx train``: trains on one or more files (CoNLL columns with a CRF++ template, or CRFsuite
    attribute lines) and writes the model to ``model``. Returns a CRF holding it. With
    type="maxent" a template's B lines are ignored, with a UserWarning (crfx train's note)."""
    files = [str(data)] if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else [str(d) for d in data]
    run = _run_arguments(algorithm, all_possible_states, all_possible_transitions, device, threads, min_freq, type,
                         max_memory, verbose, max_device_memory)
    trained = _crfx.train_file(files, _text("format", format, ("conll", "crfsuite")),
                               "" if template is None else str(template), run["algorithm"],
                               {name: _plain(value) for name, value in params.items()}, run["all_states"],
                               run["all_transitions"], run["device"], run["threads"], run["min_freq"], run["type"],
                               run["max_memory"], run["max_device_memory"], run["verbose"])
    trained.save(str(model))
    crf = CRF(algorithm=algorithm, device=device, threads=threads, type=type, max_memory=max_memory,
              max_device_memory=max_device_memory, **params)
    crf._model, crf._log = trained, TrainingLog(trained)
    return crf


def tag_file(model, inputs, output=None, output_dir=None, suffix="", recursive=False, keep_going=False,
             probability=False, marginals=False, nbest=1, device="auto", threads=0):
    """``crfx tag``: tags files (or directories, with recursive) with a model file, into one
    output (``output``; standard output when neither is given) or one file per input under
    ``output_dir``. Returns the run's figures (inputs, sentences, tokens, seconds, failures)."""
    files = [str(inputs)] if isinstance(inputs, (str, bytes)) or hasattr(inputs, "__fspath__") else [str(i) for i in inputs]
    return _crfx.tag_file(str(model), files, "" if output is None else str(output),
                          "" if output_dir is None else str(output_dir), suffix, recursive, keep_going,
                          probability, marginals, _count("nbest", nbest, 1), _device(device),
                          _count("threads", threads, 0))


from . import metrics  # noqa: E402  (crfx.metrics, as sklearn_crfsuite.metrics)
