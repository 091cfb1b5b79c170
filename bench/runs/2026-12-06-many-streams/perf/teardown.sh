#!/bin/bash
umount /tmp/streams-perf/mnt; losetup -d $(cat /tmp/streams-perf/loop); rm -f /dev/shm/streams-perf.img
