#!/bin/sh
# Stands for an attnscope-probe that refuses the file at open (exit status kProbeRefused), so
# attnscope-cli opens the file itself: lets a test reach errors of the in-process reader.
exit 2
