/*
 * q_text_stop.h -- MongoDB's stop word lists by language (q_text_stop.c).
 */
#ifndef Q_TEXT_STOP_H
#define Q_TEXT_STOP_H

/* The stop words of language `lang` (its full name) as one string of
 * words separated by single spaces, or NULL (none). */
const char *q_text_stop_words(const char *lang);

#endif /* Q_TEXT_STOP_H */
