"""``python -m virtualstac.demo`` runs the main job."""

from virtualstac.demo import main

raise SystemExit(main())
