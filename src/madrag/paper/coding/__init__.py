"""The MADRAG paper's qualitative coding of its errors (4.4 and Appendix E): the rows to code and the tables of a
coded file.

* :mod:`~madrag.paper.coding.errors_export`: the high-disagreement error export (``madrag errors``), with the
  essays, every protocol's score, rationale and debate, and empty coding columns;
* :mod:`~madrag.paper.coding.hand_codes`: a coded export's hand codes carried into a new export, never written over;
* :mod:`~madrag.paper.coding.coded_tables`: the paper's Tables 3, 4, 5, 10 and 11 from a coded export
  (``madrag paper error-tables``).

A run's scores, Judge records and debates are read by the core (:mod:`madrag.evaluation.sources`), as the HTML
report reads them.
"""
