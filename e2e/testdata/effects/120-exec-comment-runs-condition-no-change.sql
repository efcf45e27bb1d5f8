--@ writes:
--@ conservative
--@ note: the run comment adds AND 0: no row changes, the account still names kv
UPDATE {{kv}} SET v = {{n}} WHERE id = 1 /*!40101 AND 0 */
