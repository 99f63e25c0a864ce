"""``python -m docs_render``: render every doc's blocks, or check them (:func:`docs_render.cli.main`)."""
import sys

from docs_render.cli import main

sys.exit(main())
