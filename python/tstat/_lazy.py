"""pandas, imported when first used: `import tstat` stays fast (pandas
takes longer to import than the rest together), and the capture side
(tstat.pytorch) works where pandas is not installed."""


class _Pandas:
    def __getattr__(self, name):
        import pandas
        return getattr(pandas, name)


pd = _Pandas()
