/*
 * export.h - marking librdmacm's ABI surface: compiled with
 * -fvisibility=hidden, a function is exported only with SRN_RDMACM_EXPORT
 * and a line in src/rdmacm/librdmacm.map.
 */
#ifndef SRN_RDMACM_EXPORT_H
#define SRN_RDMACM_EXPORT_H

#define SRN_RDMACM_EXPORT __attribute__((visibility("default")))

#endif
