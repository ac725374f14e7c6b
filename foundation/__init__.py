"""The small modules every layer uses and that import nothing else of moviemem: errors, settings,
the plug-in registry, time formats, digests, atomic files, hardware facts, progress, word counts,
URL checks, loopback servers and the version. Kept apart so that the layers above may share them
without sharing anything else."""
