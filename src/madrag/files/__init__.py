"""The files madrag writes for a person or a later command: each written whole (:mod:`~madrag.files.atomic`), a CSV
safe to open in a spreadsheet (:mod:`~madrag.files.csv_safe`), and what the disk refuses said in one line
(:mod:`~madrag.files.disk_errors`)."""
