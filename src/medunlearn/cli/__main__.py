"""``python -m medunlearn.cli …`` (what ``accelerate launch -m medunlearn.cli`` runs)."""

import sys

from medunlearn.cli import main

if __name__ == "__main__":  # a spawned worker (medunlearn study) imports this module again
    sys.exit(main())
