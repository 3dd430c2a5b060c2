from netqual.cli import main

raise SystemExit(main())
