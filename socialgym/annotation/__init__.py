"""Annotation of discussions: k annotators rate each comment's toxicity and argument quality
(1..5); per-comment means and annotator polarisation (nDFU)."""

from socialgym.annotation.annotators import (
    ANNOTATION_SCHEMA, LexiconAnnotator, LLMAnnotators, ScriptedAnnotator, annotate_discussion, check_annotation,
    parse_text_form,
)
from socialgym.annotation.base import Annotation, AnnotationRequest, Annotator
from socialgym.annotation.polarization import ndfu

__all__ = ["Annotation", "AnnotationRequest", "Annotator", "LLMAnnotators", "ScriptedAnnotator",
           "LexiconAnnotator", "annotate_discussion", "check_annotation", "parse_text_form",
           "ANNOTATION_SCHEMA", "ndfu"]
