from prof_engine._entry import main

main()
