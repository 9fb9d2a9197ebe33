<?php
header('Content-Type: text/plain');
echo "php-fpm in the cluster\n";
echo "SCRIPT_FILENAME=", $_SERVER['SCRIPT_FILENAME'] ?? '', "\n";
echo "SERVER_NAME=", $_SERVER['SERVER_NAME'] ?? '', "\n";
echo "HOSTNAME=", gethostname(), "\n";
