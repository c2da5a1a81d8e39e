"""``python -m sentlab.cli``: the ``sentlab`` command."""

import sys

from . import main

sys.exit(main())
