#include <cstdio>
int main() { std::puts("zaya"); return 0; }
