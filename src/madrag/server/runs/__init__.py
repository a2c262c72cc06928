"""A run in the web app: its ``run.json`` (:mod:`.repo`), the scheduler on the scoring thread
(:mod:`.scheduler`), its live progress and events (:mod:`.progress`, :mod:`.events`), its cached score views
(:mod:`.views`), its stored results read through the library (:mod:`.library_runs`), the teacher's list of runs
(:mod:`.archive`), its backend (:mod:`.backends`, :mod:`.probe`, :mod:`.keys`) and how the API shows it
(:mod:`.responses`)."""
