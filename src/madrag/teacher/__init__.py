"""The teacher's side of madrag, apart from the web server: which trait scores to review first, the
gradebook a class's scores reach, and how a file's columns map onto essays. Plain functions on plain data, so
the pages, the API and tests share them."""
