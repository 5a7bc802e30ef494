"""Host settings an inference engine depends on: /dev/shm, the CPU governor."""
