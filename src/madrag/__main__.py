"""``python -m madrag``: the same as the ``madrag`` console script."""

from madrag.cli.app import main

main()
