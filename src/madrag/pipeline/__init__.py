"""Running a scoring job: the job description and its execution (``job``), the async runner (``runner``)."""
