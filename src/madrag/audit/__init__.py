"""``madrag audit``: how far to trust a scorer, measured on a run's own essays with whatever backend it used.

A sample of the run's essays is scored again under controlled changes (:mod:`madrag.audit.runner`) and the run
is measured on four counts, per protocol and trait, with bootstrap intervals over essays:

1. stability (:mod:`~madrag.audit.stability`): other seeds and the debaters' temperature;
2. perturbations (:mod:`~madrag.audit.perturbations`, :mod:`~madrag.audit.shifts`): injected instructions,
   off-topic text, padding, placeholders, names, spelling noise, each with the shift a valid scorer shows;
3. compression (:mod:`~madrag.audit.compression`): predicted vs human distributions, ends, slope, Table 2;
4. evidence and placeholders (:mod:`madrag.evaluation.evidence`): already recorded per call.
"""

from madrag.audit.api import aaudit, audit
from madrag.audit.report import AuditReport, audit_html, load_audit

__all__ = ["AuditReport", "aaudit", "audit", "audit_html", "load_audit"]
