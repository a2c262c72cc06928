"""A class from Canvas and back: the credentials (:mod:`.credentials`), the Canvas client over canvasapi with its
retries and one-line refusals (:mod:`.client`), the Canvas rubric as madrag's (:mod:`.rubric_import`), the pull of an
assignment into madrag's inputs with its manifest (:mod:`.pull`, :mod:`.manifest`), and the push of a run's grades,
rubric assessments and feedback back to Canvas, previewed first and resumable (:mod:`.push`, :mod:`.journal`).

The grades it sends are the gradebook's rows (:mod:`madrag.teacher.gradebook`, each grade by
:mod:`madrag.teacher.grades`): this package never reads a run or decides a grade itself. docs/lms.md."""
