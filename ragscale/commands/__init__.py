"""The command-line layer: one module per ``ragscale`` subcommand, each with ``main(argv) -> int``
(argument parsing, printing, the exit code) over the library modules that do the work.

    run        ``ragscale run`` / ``python -m ragscale.run``: Hydra's command line over ragscale.driver
    scenarios  ``ragscale scenarios``: the scenarios, their steps and samples
    metrics    ``ragscale metrics``: the metric catalog (ragscale.catalog)
    report     ``ragscale report``: a run's report.html (ragscale.report.html)
    agree      ``ragscale agree``: judge-vs-human agreement (ragscale.report.agreement)
    compare    ``ragscale compare``: paired tests between two runs (ragscale.report.compare)
    calibrate  ``ragscale calibrate``: PPI++ estimates (ragscale.report.calibration)
    plot       ``ragscale plot``: comparison plots (ragscale.report.plots)
    prompts    ``ragscale prompts``: the dry run (ragscale.dryrun)

``ragscale.cli`` dispatches to them; ``text`` holds their shared two-column layout. Each module also
runs as ``python -m ragscale.commands.<name>``.
"""
