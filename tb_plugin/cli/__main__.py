"""``python -m tb_plugin.cli``: the same as the ``pytorch-tb-profiler`` command."""

import sys

from . import main

sys.exit(main())
