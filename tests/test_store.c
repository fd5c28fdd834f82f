/* stub: being written */
int main(void) { return 77; }
