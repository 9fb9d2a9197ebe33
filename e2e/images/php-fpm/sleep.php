<?php
// A request that keeps a php-fpm worker busy at almost no CPU, as one waiting on a
// database or an upstream API does (the pool autoscaling test).
usleep(200000);
header('Content-Type: text/plain');
echo "slept 200 ms on ", gethostname(), "\n";
