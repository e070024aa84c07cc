"""``python -m medunlearn.cli …`` (what ``accelerate launch -m medunlearn.cli`` runs)."""

import sys

from medunlearn.cli import main

sys.exit(main())
