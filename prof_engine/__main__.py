from prof_engine.cli import main

main()
