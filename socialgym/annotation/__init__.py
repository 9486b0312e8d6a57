"""Annotation of discussions: k annotators rate each comment's toxicity and argument quality
(1..5); per-comment means and annotator polarisation (nDFU).

The annotators (``annotators.py``) load the LLM layer, so they are exported lazily: the
discussion environment needs only ``AnnotationRequest``, and ``import socialgym`` stays light.
"""

from socialgym.annotation.base import Annotation, AnnotationRequest, Annotator
from socialgym.annotation.polarization import ndfu

_ANNOTATORS = ("ANNOTATION_SCHEMA", "LexiconAnnotator", "LLMAnnotators", "ScriptedAnnotator", "annotate_discussion",
               "check_annotation", "parse_text_form")

__all__ = ["Annotation", "AnnotationRequest", "Annotator", "LLMAnnotators", "ScriptedAnnotator",
           "LexiconAnnotator", "annotate_discussion", "check_annotation", "parse_text_form",
           "ANNOTATION_SCHEMA", "ndfu"]


def __getattr__(name: str):
    """Lazy exports (PEP 562): ``annotators.py`` is imported when one of its names is first asked for."""
    if name not in _ANNOTATORS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from socialgym.annotation import annotators

    value = getattr(annotators, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ANNOTATORS))
