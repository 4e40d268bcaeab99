"""Scores of predicted label sequences, as sklearn_crfsuite.metrics has them.

The flat_* functions flatten y_true and y_pred (lists of label sequences) into one list of
labels each and pass them, with any keyword arguments (labels, average, digits, …), to
scikit-learn's function of the same name without the prefix. scikit-learn is imported when one
of them is called; sequence_accuracy_score needs nothing.
"""

__all__ = ["flat_accuracy_score", "flat_precision_score", "flat_recall_score", "flat_f1_score",
           "flat_classification_report", "sequence_accuracy_score"]


def _sklearn_metrics():
    try:
        from sklearn import metrics
    except ImportError as e:
        raise ImportError("crfx.metrics' flat_* scores need scikit-learn (pip install scikit-learn, or apt "
                          "install python3-sklearn)") from e
    return metrics


def _flatten(y_true, y_pred):
    """The labels of y_true and y_pred, sequence after sequence; ValueError where the numbers
    of sequences or of labels in a sequence differ."""
    y_true, y_pred = list(y_true), list(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError("%d sequences in y_true but %d in y_pred" % (len(y_true), len(y_pred)))
    flat_true, flat_pred = [], []
    for s, (true_seq, pred_seq) in enumerate(zip(y_true, y_pred)):
        true_seq, pred_seq = list(true_seq), list(pred_seq)
        if len(true_seq) != len(pred_seq):
            raise ValueError("sequence %d: %d labels in y_true but %d in y_pred" % (s, len(true_seq), len(pred_seq)))
        flat_true.extend(true_seq)
        flat_pred.extend(pred_seq)
    return flat_true, flat_pred


def flat_accuracy_score(y_true, y_pred, **kwargs):
    """The fraction of tokens labelled right (sklearn.metrics.accuracy_score)."""
    return _sklearn_metrics().accuracy_score(*_flatten(y_true, y_pred), **kwargs)


def flat_precision_score(y_true, y_pred, **kwargs):
    """sklearn.metrics.precision_score of the tokens' labels."""
    return _sklearn_metrics().precision_score(*_flatten(y_true, y_pred), **kwargs)


def flat_recall_score(y_true, y_pred, **kwargs):
    """sklearn.metrics.recall_score of the tokens' labels."""
    return _sklearn_metrics().recall_score(*_flatten(y_true, y_pred), **kwargs)


def flat_f1_score(y_true, y_pred, **kwargs):
    """sklearn.metrics.f1_score of the tokens' labels."""
    return _sklearn_metrics().f1_score(*_flatten(y_true, y_pred), **kwargs)


def flat_classification_report(y_true, y_pred, **kwargs):
    """sklearn.metrics.classification_report of the tokens' labels."""
    return _sklearn_metrics().classification_report(*_flatten(y_true, y_pred), **kwargs)


def sequence_accuracy_score(y_true, y_pred):
    """The fraction of sequences labelled right in every token."""
    y_true, y_pred = list(y_true), list(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError("%d sequences in y_true but %d in y_pred" % (len(y_true), len(y_pred)))
    if not y_true:
        return 0.0
    matches = sum(1 for true_seq, pred_seq in zip(y_true, y_pred) if list(true_seq) == list(pred_seq))
    return matches / len(y_true)
