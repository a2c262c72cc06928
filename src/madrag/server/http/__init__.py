"""What goes over HTTP, for the JSON API and the pages alike: the requests (:mod:`.schemas`) and answers
(:mod:`.responses`), the server's error kinds (:mod:`.faults`) and their status codes (:mod:`.errors`), refused
upload rows (:mod:`.refusals`), and the token, CSRF and upload rules (:mod:`.security`). It is the server's
lowest layer: the runs, the service and both front ends build on it."""
