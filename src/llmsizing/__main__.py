"""``python -m llmsizing``: the command line (:mod:`llmsizing.cli`)."""

import sys

from .cli import main

sys.exit(main())
