/*
 * progress runs one statement with libmariadb's progress callback set (so
 * the connection asks for MARIADB_CLIENT_PROGRESS, as the mariadb command-
 * line client does) and prints every report it gets, then the outcome.
 *
 * usage: progress host port user password db statement
 */
#include <stdio.h>
#include <stdlib.h>
#include <mysql.h>

static void report(const MYSQL *m, unsigned int stage, unsigned int max_stage, double progress,
                   const char *info, unsigned int len)
{
	(void)m;
	printf("progress stage=%u max=%u percent=%.1f info=%.*s\n", stage, max_stage, progress, (int)len, info);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	MYSQL *m;

	if (argc != 7) {
		fprintf(stderr, "usage: progress host port user password db statement\n");
		return 2;
	}
	m = mysql_init(NULL);
	if (m == NULL || mysql_optionsv(m, MYSQL_PROGRESS_CALLBACK, (void *)report) != 0) {
		fprintf(stderr, "cannot set the progress callback\n");
		return 1;
	}
	if (!mysql_real_connect(m, argv[1], argv[3], argv[4], argv[5], (unsigned int)atoi(argv[2]), NULL, 0)) {
		fprintf(stderr, "connect: %s\n", mysql_error(m));
		return 1;
	}
	if (mysql_query(m, argv[6]) != 0)
		printf("error %u (%s) %s\n", mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
	else
		printf("ok\n");
	mysql_close(m);
	return 0;
}
