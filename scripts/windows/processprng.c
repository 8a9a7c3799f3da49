/*
 * bcryptprimitives.dll for Wine 8, which lacks ProcessPrng: Rust's std for
 * Windows imports it to seed HashMap keys, so without it no Rust program
 * starts. One function, filled from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine has. Built and installed into the
 * project's private Wine prefix by scripts/wine-setup.sh; never shipped.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
