from collector.cli.main import main

raise SystemExit(main())
